"""A face's batch against the same calls submitted directly: the same results,
ledger rows and transcript, up to what differs between any two batches (ids,
times, durations, which worker ran a call)."""

from __future__ import annotations

from typing import Any

# What differs between two runs of the same calls and says nothing of them.
VARYING = {"id", "key", "worker", "at", "cpu_seconds", "worker_seconds"}
VARYING_ENDS = ("_at", "_ms", "_id")


def shape(value: Any) -> Any:
    """`value` without what varies from run to run."""
    if isinstance(value, dict):
        return {
            name: shape(item)
            for name, item in value.items()
            if name not in VARYING and not name.endswith(VARYING_ENDS)
        }
    if isinstance(value, list):
        return [shape(item) for item in value]
    return value


def results(rt, batch_id: str) -> list[tuple[str, str, str]]:
    return [
        (r.call_id, r.status.value, r.model_message)
        for r in rt.attach(batch_id).results(timeout=60)
    ]


def rows(rt, batch_id: str) -> list[tuple[str, str]]:
    """A batch's ledger rows as (call, kind), in an order that ignores timing."""
    return sorted((row.call_id or "", row.kind) for row in rt.ledger.events(batch_id))


def transcript(rt, batch_id: str) -> Any:
    document = rt.transcript(batch_id)
    document.pop("integrity", None)
    return shape(document)


def assert_same_as_direct(rt, face: str, calls: list[dict[str, Any]], **policy: Any) -> str:
    """`calls` submitted directly under `policy` end as the face's batch did:
    the same results, ledger rows and transcript. The direct batch's id."""
    direct = rt.submit(calls, **policy).batch_id
    for part in (results, rows, transcript):
        theirs, ours = part(rt, face), part(rt, direct)
        assert theirs == ours, f"{part.__name__}: {differences(theirs, ours)}"
    return direct


def differences(one: Any, other: Any, at: str = "") -> list[str]:
    """Where two shapes differ, as paths (the message of a failed comparison)."""
    if isinstance(one, dict) and isinstance(other, dict):
        return [
            found
            for name in sorted(set(one) | set(other))
            for found in differences(one.get(name), other.get(name), f"{at}.{name}")
        ]
    if isinstance(one, list) and isinstance(other, list) and len(one) == len(other):
        return [
            found
            for index, pair in enumerate(zip(one, other, strict=True))
            for found in differences(*pair, f"{at}[{index}]")
        ]
    return [] if one == other else [f"{at}: {one!r} != {other!r}"]
