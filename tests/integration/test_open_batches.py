"""The open-batches cap under concurrent submits (docs/architecture.md,
"Flow control"): the count and the batch's record are one step, so of many
submits of one submitter at once exactly the cap's number pass, and a
refused batch wrote and sent nothing."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest

from runtime.client import Runtime
from runtime.errors import TooManyOpenBatches
from tests.conftest import runtime_on
from tests.support.postgres import fresh_database
from tests.support.tools import marks, release
from tests.support.waiting import wait_for

CAP, SUBMITS = 2, 8


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request):
    """The stack's SQLite ledger (None), or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: PostgreSQL tests skipped")
    with fresh_database(url) as found:
        yield found


@pytest.fixture
def capped(stack, user_settings, tmp_path):
    policy = tmp_path / "org.json"
    policy.write_text(json.dumps({"limits": {"size": {"open_batches_per_key": CAP}}}))
    made = []

    def make(database: str | None = None):
        rt = runtime_on(stack, user_settings, policy_file=policy)
        if database is not None:  # the same client, its ledger elsewhere
            rt.close()
            rt = Runtime(rt.settings.model_copy(update={"database_url": database}))
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()


def submit_at_once(rt, calls, workspace, who, mode) -> tuple[list, list]:
    """`SUBMITS` submits of `who`, released together: (handles, refusals)."""
    start, handles, refused = threading.Barrier(SUBMITS), [], []

    def submit(index: int) -> None:
        start.wait()
        try:
            handles.append(rt.submit(calls(index), mode=mode, workspace=workspace, submitter=who))
        except TooManyOpenBatches as error:
            refused.append(error)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(SUBMITS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return handles, refused


def test_concurrent_submits_at_the_cap_pass_exactly_the_cap(capped, database, workspace):
    rt, who = capped(database), f"tester-{uuid.uuid4().hex[:8]}"
    writes = lambda i: [{"id": "w", "name": "bump", "arguments": {"label": f"b{i}"}}]  # noqa: E731
    handles, refused = submit_at_once(rt, writes, workspace, who, mode="default")  # they wait
    try:
        assert (len(handles), len(refused)) == (CAP, SUBMITS - CAP)
        assert f"{who} has {CAP} batches open" in str(refused[0])
        assert rt.ledger.open_batches(who) == CAP  # a refused batch wrote nothing
    finally:
        for handle in handles:
            handle.cancel()


def test_reads_under_the_cap_are_not_sent_before_their_record(capped, workspace):
    """A batch of reads is sent before its record when nothing caps its
    submitter ("Sent before recorded"): under the cap it is recorded first,
    so a refused one sent nothing."""
    rt, who = capped(), f"tester-{uuid.uuid4().hex[:8]}"
    reads = lambda i: [{"id": "r", "name": "held", "arguments": {"label": "all"}}]  # noqa: E731
    handles, refused = submit_at_once(rt, reads, workspace, who, mode="auto")
    try:
        assert (len(handles), len(refused)) == (CAP, SUBMITS - CAP)
        wait_for(lambda: len(marks(workspace, "held")) >= CAP, 30, "start of each admitted read")
        time.sleep(0.5)  # a refused batch's read, had it been sent, would start by now
        assert len(marks(workspace, "held")) == CAP
    finally:
        release(workspace, "all")
    assert all(r.ok for h in handles for r in h.results(timeout=60))
