"""A submitter killed between two rounds of its first stage
(runtime/transport/cluster.py): every mark and the batch's record landed with
the first round, so the sweep records the batch and sends the reads no round
carried once their marks are `resend_after` old; each read runs once."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.submitter import DIES_AFTER_ROUNDS, ROUND_SIZE, spawn
from tests.support.tools import marks

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150)]


@pytest.fixture
def stack(tmp_path, user_settings):
    """The sweep writes a kept record after `unrecorded_patience` and sends a
    marked read again after `resend_after`: 1 s and 3 s here, not 10 and 15."""
    with FaultStack(
        tmp_path / "home", user_settings=user_settings, unrecorded_patience=1.0, resend_after=3.0
    ) as stack:
        yield stack


def test_a_submitter_killed_between_rounds_leaves_the_rest_to_the_sweep(stack, workspace):
    ids = [f"r{i}" for i in range(8)]
    spec = {
        "calls": [{"id": c, "name": "nap", "arguments": {"label": c}} for c in ids],
        "mode": "auto",
        "workspace": str(workspace),
    }
    process, batch_id = spawn(stack, spec, env={DIES_AFTER_ROUNDS: "1", ROUND_SIZE: "3"})
    assert process.wait(timeout=60) == -9 and batch_id
    with stack.client() as runtime:
        results = runtime.attach(batch_id).results(timeout=90)
        ends = runtime.ledger.ends(batch_id)
    assert [r.call_id for r in results] == ids
    assert all(r.status is Status.ok for r in results), [r.model_message for r in results]
    assert set(ends) == set(ids)
    runs = marks(workspace, "intervals")
    assert Counter(m["call_id"] for m in runs) == dict.fromkeys(ids, 1)
    started = {m["call_id"]: m["start"] for m in runs}
    carried, left = ids[:3], ids[3:]  # the first round's, and the sweep's
    assert min(started[c] for c in left) - max(started[c] for c in carried) >= 2.0
