"""What the soak checks of every batch once its stream has ended: each call
one result, each side effect run at most once and never beside another of its
batch, and in the ledger one decision row and one end per call, the end the
client was streamed, and no side effect that ran ending as if it never did."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from tests.soak.tally import Tally
from tests.support.tools import marks

UNRUN = ("denied", "skipped")  # ends that say the call never ran
LEDGER_PATIENCE = 30.0  # seconds a check waits out a ledger cut


def follow(runtime, tally: Tally, calls: list[dict], handle, workspace: Path) -> None:
    """Stream `handle`'s results to their end, then check the batch."""
    with tally.lock:
        tally.calls += len(calls)
        tally.in_flight += len(calls)
        tally.peak = max(tally.peak, tally.in_flight)
    seen: Counter[str] = Counter()
    streamed: dict[str, str] = {}
    try:
        for result in handle.stream(timeout=90, notices=False):
            seen[result.call_id] += 1
            streamed[result.call_id] = result.status.value
            with tally.lock:
                tally.in_flight -= 1
                tally.statuses[result.status.value] += 1
                if result.status.value not in ("ok", "skipped"):
                    tally.reasons[result.model_message.split(";")[0][:90]] += 1
    except Exception as error:  # noqa: BLE001 - a result stream must never raise
        tally.error(f"stream: {type(error).__name__}: {error}")
    missing = sum(1 for call in calls if seen[call["id"]] == 0)
    with tally.lock:
        tally.missing += missing
        tally.duplicated += sum(count - 1 for count in seen.values() if count > 1)
        tally.in_flight -= missing
        tally.followed.append((handle.batch_id, calls, streamed, workspace))  # for `audit`


def audit(ledger, tally: Tally, patience: float) -> None:
    """Once the soak is over (so that a side effect run after its batch ended
    counts too): every batch followed is marked ended within `patience`
    seconds; its side effects ran at most once and never beside another of
    the batch; its calls pass `in_ledger` (an end the ledger could not take
    during a cut is written once it is back)."""
    batches_ended(ledger, tally, patience)
    for batch_id, calls, streamed, workspace in tally.followed:
        ran = Counter(mark["label"] for mark in marks(workspace, "effects"))
        tally.twice += sum(1 for count in ran.values() if count > 1)
        tally.overlapped += overlaps(workspace)
        in_ledger(ledger, tally, batch_id, calls, streamed, ran)
        done = {mark["label"] for mark in marks(workspace, "effects_done")}
        lost = [c for c, status in streamed.items() if status == "outcome_unknown" and c in done]
        tally.figures["side effects that finished yet ended outcome_unknown"] += len(lost)


def in_ledger(
    ledger, tally: Tally, batch_id: str, calls: list[dict], streamed: dict, ran: Counter
) -> None:
    """One decision row and one end per call, the end streamed, and no side
    effect that ran (its label is its call id) ending denied or skipped."""
    read = reading(tally, lambda: (ledger.ends(batch_id), ledger.events(batch_id)))
    if read is None:
        return
    ends, events = read
    decisions = Counter(e.call_id for e in events if e.effect is not None)
    ids = [call["id"] for call in calls]
    wrong = [f"{c}: {decisions[c]}" for c in ids if decisions[c] != 1]
    tally.broke("calls without exactly one decision row", f"{batch_id} {wrong[:3]}", len(wrong))
    unended = [f"{c} (streamed {streamed.get(c)})" for c in ids if c not in ends]
    tally.broke("calls without an end in the ledger", f"{batch_id} {unended[:3]}", len(unended))
    unlike = [
        f"{c}: streamed {s}, ledger {ends[c].status.value}"
        for c, s in streamed.items()
        if c in ends and ends[c].status.value != s
    ]
    tally.broke("ends unlike the result streamed", f"{batch_id} {unlike[:2]}", len(unlike))
    unrun = [
        f"{c}: {ends[c].status.value}" for c in ids if c in ends and ran[c] and _unrun(ends[c])
    ]
    tally.broke(
        "side effects that ran yet ended as never run", f"{batch_id} {unrun[:2]}", len(unrun)
    )


def _unrun(result) -> bool:
    return result.status.value in UNRUN


def reading(tally: Tally, read):
    """`read()` of the ledger, waiting out a cut; None (an error) if it stays away."""
    give_up = time.monotonic() + LEDGER_PATIENCE
    while True:
        try:
            return read()
        except Exception as error:  # noqa: BLE001 - the ledger cut: try again
            if time.monotonic() > give_up:
                tally.error(f"ledger read: {type(error).__name__}: {error}")
                return None
            time.sleep(0.5)


def overlaps(workspace: Path) -> int:
    """Side effects of one batch that started before the one before them ended
    (slow_bump and overrun_write stamp both edges; a killed one has no end)."""
    spans = {m["label"]: [m["at"], None] for m in marks(workspace, "effects")}
    for mark in marks(workspace, "effects_done"):
        spans[mark["label"]][1] = mark["at"]
    for mark in marks(workspace, "stamps"):
        span = spans.setdefault(mark["label"], [None, None])
        span[0 if mark["edge"] == "start" else 1] = mark["at"]
    ordered = sorted((start, end) for start, end in spans.values() if start is not None)
    return sum(
        1
        for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False)
        if end is not None and start < end
    )


def batches_ended(ledger, tally: Tally, patience: float) -> None:
    """Every batch the soak followed is marked ended within `patience` seconds."""
    give_up = time.monotonic() + patience
    open_ = [batch_id for batch_id, *_ in tally.followed]
    while open_ and time.monotonic() < give_up:
        rows = reading(tally, lambda looked=tuple(open_): [ledger.batch(b) for b in looked])
        if rows is None:
            return
        open_ = [
            b for b, row in zip(open_, rows, strict=True) if row is None or row.ended_at is None
        ]
        if open_:
            time.sleep(1.0)
    tally.broke("batches never marked ended", f"{open_[:3]}", len(open_))
