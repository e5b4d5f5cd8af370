"""Soak: batches run without pause on a stack of their own while faults are
injected at random; a supervisor starts a replacement for every worker
killed, as a restart policy would.

    python -m tests.soak [--minutes 3] [--seed N] [--effects processes|workers]
                         [--visibility-timeout S] [--postgres URL]

The faults (tests/soak/injector.py): SIGKILL of a reads worker, of an effects
worker, of one pool process, of the worker holding the sweep's lock; a Redis
restart; a ledger cut; the process that submitted a batch killed; submitter
processes racing one key with other rules; a process started while the
ledger is locked; the effects queue backed up past the sweep's resend; an
effects worker's main process frozen (SIGSTOP, then SIGCONT) a second into a
long side effect; Redis restarted under a long side effect. Some
calls are stuck on purpose: C code holding the GIL on either queue (its
process is killed at the hard limit), a backtracking `re`, a side effect
sleeping past its timeout.

The stack runs as in production where it matters: the broker's visibility
timeout is the default of runtime/settings.py (not the suite's 3 s), and the
effects queue has two slots, as one worker with two processes
(TOOLRUN_EFFECTS_CONCURRENCY=2) or as two workers of one process
(`--scale effects=2`), or four, as two workers of two processes each,
by the seed (its remainder by 3, in that order) or `--effects`.

Prints the faults injected, the calls submitted and those in flight when a
fault hit, and the figures that must be 0: calls left without exactly one
result, side effects that ran twice, side effects of one batch that
overlapped, and what the ledger holds against that (one decision row and
one end per call, the end streamed, batches marked ended) and what the new
faults break. Exits 1 if any is not 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from runtime.settings import Settings
from tests.soak.batches import submitter
from tests.soak.checks import audit
from tests.soak.injector import Injector
from tests.soak.tally import Tally, report
from tests.support.faults import FaultStack, Relay

SUBMITTERS = 3
# effects workers, processes each
LAYOUTS = {"processes": (1, 2), "workers": (2, 1), "both": (2, 2)}
ENDED_PATIENCE = 45.0  # seconds for the last batches to be marked ended (the sweep: 15 s after)


def options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--effects",
        choices=sorted(LAYOUTS),
        help="the effects queue's slots: one worker of two processes, two workers "
        "of one, or two of two (default: by the seed's remainder by 3, in that order)",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=float,
        default=Settings.model_fields["visibility_timeout"].default,
        metavar="S",
        help="the broker's (default: production's, %(default)g s)",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="ledger on a fresh PostgreSQL database "
        "behind a relay the soak cuts (default: SQLite, locked)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    given = options(argv)
    seed = given.seed if given.seed is not None else random.randrange(1 << 30)
    layout = given.effects or ["processes", "workers", "both"][seed % 3]
    effects_workers, effects_concurrency = LAYOUTS[layout]
    setup = {
        "effects": f"{effects_workers} worker(s) x {effects_concurrency} process(es)",
        "visibility timeout": given.visibility_timeout,
        "ledger": "postgres" if given.postgres else "sqlite",
    }
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("toolrun").setLevel(logging.CRITICAL)  # the faults are expected
    print(f"soak: {given.minutes:g} min, seed {seed}, {json.dumps(setup)}", flush=True)
    with ExitStack() as cleanup:
        base = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="toolrun-soak-")))
        user_settings = base / "user-settings.json"
        user_settings.write_text(json.dumps({"trusted_workspaces": [str(base)]}))
        relay = database_url = None
        if given.postgres:
            from tests.support.postgres import fresh_database

            relay, database_url = Relay.in_front_of(
                cleanup.enter_context(fresh_database(given.postgres))
            )
            cleanup.callback(relay.close)
        started = time.monotonic()
        stack = FaultStack(
            base / "home",
            user_settings=user_settings,
            appendonly=True,
            visibility_timeout=given.visibility_timeout,
            reads_workers=2,
            effects_workers=effects_workers,
            effects_concurrency=effects_concurrency,
            database_url=database_url,
            relay=relay,
        )
        stack.start()
        cleanup.callback(stack.stop)
        runtime = stack.runtime()
        cleanup.callback(runtime.close)
        cleanup.enter_context(stack.keep_workers("reads", 2))
        cleanup.enter_context(stack.keep_workers("effects", effects_workers))
        print(f"soak: stack up in {time.monotonic() - started:.1f} s", flush=True)
        tally, stop = Tally(), threading.Event()
        injector = Injector(stack, runtime, base, tally, effects_workers * effects_concurrency)
        threads = [
            threading.Thread(
                target=submitter, args=(stack, runtime, base, tally, stop, seed + index)
            )
            for index in range(SUBMITTERS)
        ]
        threads.append(threading.Thread(target=injector.run, args=(stop, random.Random(seed))))
        began = time.monotonic()
        for thread in threads:
            thread.start()
        try:
            time.sleep(given.minutes * 60)
        except KeyboardInterrupt:
            print("soak: interrupted, finishing the batches under way", flush=True)
        stop.set()
        print("soak: load stopped, finishing the batches under way", flush=True)
        for thread in threads:
            thread.join(timeout=150)
        joined = 0
        while joined < len(tally.threads):  # the faults' threads, some started by others
            tally.threads[joined].join(timeout=150)
            joined += 1
        print(f"soak: all ended after {time.monotonic() - began:.0f} s; auditing", flush=True)
        audit(runtime.ledger, tally, ENDED_PATIENCE)
        return report(tally, time.monotonic() - began, stack, setup)


if __name__ == "__main__":
    sys.exit(main())
