"""The fault `race keyed submits`: several processes submit one batch with one
key at once, half allowing its side effects and half denying them. Exactly
one batch is accepted; the submitters with the other rules are refused with
KeyConflict before anything is written; the batch's decisions are those of
the rules it was accepted with (docs/architecture.md, "Attach and keys")."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from tests.soak.batches import BATCH_TIMEOUT, WRITES, batch_of, workspace_for
from tests.soak.checks import follow, reading
from tests.soak.tally import Tally
from tests.support.racer import race_in

DENY = {"deny": WRITES["allow"]}
RACERS = 4  # half allow, half deny
BROKEN = "racing keyed submits gone wrong"


def race_keyed_submits(stack, runtime, base: Path, tally: Tally, rng: random.Random) -> None:
    number = tally.number()
    calls = batch_of(rng, number)
    calls.insert(rng.randrange(len(calls) + 1), bump("w"))  # a side effect to allow or deny
    workspace = workspace_for(base, number)
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "on_error": rng.choice(["stop", "continue"]),
        "timeout": BATCH_TIMEOUT,
        "key": f"soak-race-{uuid.uuid4().hex}",
    }
    specs = [{**spec, "rules": WRITES}, {**spec, "rules": DENY}] * (RACERS // 2)
    rng.shuffle(specs)
    log = Path(stack.home) / "logs" / f"race-{number}.log"
    try:
        with open(log, "w") as stderr:
            outcomes = race_in(stack.client_env(), specs, base / f"race-{number}.start", stderr)
    except AssertionError:  # a racer died before it said it was ready
        said = log.read_text(errors="replace").strip().splitlines()
        tally.broke("racing submitters that could not start", said[-1][:300] if said else "")
        return
    accepted = {o["batch_id"] for o in outcomes if "batch_id" in o}
    rules = {
        json.dumps(s["rules"]) for s, o in zip(specs, outcomes, strict=True) if "batch_id" in o
    }
    problems = [f"{len(accepted)} batches accepted"] if len(accepted) != 1 else []
    problems += ["both rules accepted"] if len(rules) > 1 else []
    for sent, outcome in zip(specs, outcomes, strict=True):
        if "batch_id" in outcome:
            continue
        if outcome.get("error") != "KeyConflict":
            problems.append(
                f"{outcome.get('error')}: {outcome.get('refused') or outcome.get('failed')}"
            )
        elif json.dumps(sent["rules"]) in rules:
            problems.append("refused with the accepted batch's own rules")
    tally.broke(BROKEN, f"{spec['key']}: {problems[:3]}", len(problems))
    if len(accepted) != 1 or len(rules) != 1:
        return
    (batch_id,) = accepted
    follow(runtime, tally, calls, runtime.attach(batch_id), workspace)
    decided(runtime.ledger, tally, batch_id, "allow" if rules == {json.dumps(WRITES)} else "deny")


def decided(ledger, tally: Tally, batch_id: str, effect: str) -> None:
    """The side effect's decision rows are all `effect`, the accepted rules'."""
    events = reading(tally, lambda: ledger.events(batch_id, "w"))
    if events is None:
        return
    effects = [e.effect for e in events if e.effect is not None]
    wrong = [e for e in effects if e != effect]
    tally.broke(BROKEN, f"{batch_id}: the accepted rules {effect}, decisions {effects}", len(wrong))


def bump(call_id: str) -> dict:
    return {"id": call_id, "name": "bump", "arguments": {"label": call_id}}
