"""Property: whatever tool calls a model emits (random names, argument shapes
and sizes, unicode, nulls, duplicated call ids, huge payloads), a batch
submitted to a real stack gets exactly one result per call, in order; nothing
but `InvalidBatch` escapes to the caller, and that only for a batch that cannot
be answered call by call (repeated call ids, a call that is not a
`{"id": str, "name": str, "arguments": ...}` object); no tool runs on input its
schema refuses; every result is bounded in size.

`make test` runs the `toolrun-ci` profile (120 examples); `make fuzz`
sets HYPOTHESIS_PROFILE=toolrun-fuzz (10,000).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from runtime.client.intake import MAX_CALL_ID
from runtime.errors import InvalidBatch
from runtime.registry.validation import Invalid, validate
from runtime.results.formatter import SUMMARY_CHARS
from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.postgres import fresh_database
from tests.support.tools import marks

settings.register_profile(
    "toolrun-ci",
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
settings.register_profile(
    "toolrun-fuzz", parent=settings.get_profile("toolrun-ci"), max_examples=10_000
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "toolrun-ci").strip())
if PROFILE.max_examples < 100:  # the `default` or `dev` profile of another suite
    PROFILE = settings.get_profile("toolrun-ci")

pytestmark = [pytest.mark.faults, pytest.mark.timeout(3600)]
ALLOW = {"allow": ["probe_write", "bump"]}
KNOWN = ["probe", "probe_write", "blob", "echo", "bump", "read_file", "list_dir"]
RUNS = {"probe", "probe_write", "blob", "bump"}  # the tools that count their runs
TOOL_NAME_CHARS = 200  # what a result keeps of a tool name the model made up
HUGE = 300_000


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory, user_settings):
    """A stack with the fault tools; its ledger on PostgreSQL when
    TOOLRUN_TEST_POSTGRES_URL names one (NUL characters and huge rows reach it)."""
    with ExitStack() as cleanup:
        postgres = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
        database_url = cleanup.enter_context(fresh_database(postgres)) if postgres else None
        stack = FaultStack(
            tmp_path_factory.mktemp("fuzz-home"),
            user_settings=user_settings,
            reads_concurrency=8,
            visibility_timeout=300,
            database_url=database_url,
        ).start()
        cleanup.callback(stack.stop)
        runtime = stack.runtime()
        cleanup.callback(runtime.close)
        yield runtime, tmp_path_factory.mktemp("fuzz-workspaces")


def huge_text(min_size: int = 40_000) -> st.SearchStrategy[str]:
    return st.builds(
        lambda n, c: c * n,
        st.integers(min_size, HUGE),
        st.sampled_from(["x", "é", "\x00", "🦀", "\u202e", "\n"]),
    )


texts = st.text(max_size=40) | st.sampled_from(["", "\x00", " ", "\ud7ff", "𝕏" * 5, "null"])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
inner = st.fixed_dictionaries(
    {"key": st.text(max_size=64)}, optional={"value": st.none() | st.integers(-(10**6), 10**6)}
)
valid_probe = st.fixed_dictionaries(
    {"text": st.text(max_size=300)},
    optional={
        "count": st.integers(0, 1000),
        "flag": st.booleans(),
        "items": st.lists(texts, max_size=16),
        "inner": st.none() | inner,
    },
)
near_probe = st.fixed_dictionaries(  # valid now and then, mostly one field off
    {"text": st.text(max_size=300) | huge_text(4_000) | json_values},
    optional={
        "count": st.integers(-5, 1005) | texts,
        "flag": st.booleans() | st.none(),
        "items": st.lists(texts, max_size=18) | texts,
        "inner": inner | json_values,
        "extra": json_values,
    },
)
VALID = {  # arguments each known tool's schema accepts
    "probe": valid_probe,
    "probe_write": valid_probe,
    "blob": st.fixed_dictionaries({"size": st.integers(0, 2_000_000)}),
    "echo": st.fixed_dictionaries({"text": texts | huge_text()}),
    "bump": st.fixed_dictionaries({"label": texts}),
    "read_file": st.fixed_dictionaries({"path": texts}),
    "list_dir": st.fixed_dictionaries({"path": st.sampled_from([".", "", "..", "/", "\x00"])}),
}
random_arguments = st.one_of(
    near_probe,
    near_probe.map(json.dumps),  # OpenAI sends arguments as a JSON string
    st.fixed_dictionaries({"label": json_values}),
    st.fixed_dictionaries({"size": st.integers(-1, 5_000_000) | texts}),
    json_values,
    texts,
    huge_text(),
    st.none(),
)
odd_names = texts | huge_text(1_000) | st.sampled_from(["probe\x00", "PROBE", " probe"])
ids = st.sampled_from(["a", "b", "toolu_01", ""]) | st.text(max_size=12)
odd_ids = huge_text(MAX_CALL_ID + 1) | st.sampled_from(["\x00", "toolu_\x00"])  # refused


@st.composite
def tool_call(draw) -> dict:
    """A call as a model might emit it: often right for its tool, often not."""
    name = draw(st.sampled_from(KNOWN) if draw(st.integers(0, 9)) < 7 else odd_names)
    valid = VALID.get(name)
    if valid is not None and draw(st.booleans()):
        arguments = draw(valid | valid.map(json.dumps))
    else:
        arguments = draw(random_arguments)
    call_id = draw(odd_ids if draw(st.sampled_from([False] * 29 + [True])) else ids)
    return {"id": call_id, "name": name, "arguments": arguments}


@st.composite
def batches(draw) -> list[dict]:
    """Mostly distinct call ids (made so); a quarter keep what was drawn, repeats included."""
    calls = draw(st.lists(tool_call(), min_size=1, max_size=6))
    if draw(st.integers(0, 3)):
        for index, call in enumerate(calls):
            call["id"] = f"{index}:{call['id']}"
    return calls


def check_bounded(result, max_bytes: int) -> None:
    assert len(result.model_message.encode()) <= max_bytes + 512, result.call_id[:40]
    assert len(json.dumps(result.content, ensure_ascii=False).encode()) <= max_bytes
    assert len(result.summary) <= SUMMARY_CHARS
    assert len(result.tool) <= TOOL_NAME_CHARS + 1


@settings(PROFILE)
@given(
    batch=batches(),
    mode=st.sampled_from(["auto", "plan", "bypass"]),
    on_error=st.sampled_from(["stop", "continue"]),
)
def test_every_generated_batch_gets_one_bounded_result_per_call(fuzz_stack, batch, mode, on_error):
    runtime, base = fuzz_stack
    workspace = Path(tempfile.mkdtemp(dir=base))
    ids = [call["id"] for call in batch]
    try:
        handle = runtime.submit(
            batch, mode=mode, workspace=workspace, rules=ALLOW, on_error=on_error, timeout=60
        )
    except InvalidBatch as error:
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if any(len(i) > MAX_CALL_ID or "\0" in i for i in ids):
            assert f"has an id longer than {MAX_CALL_ID} characters" in str(error)
            event("refused: an id the ledger cannot key")
        else:
            assert duplicates, f"refused without a duplicate id: {error}"
            assert str(error).startswith("duplicate call ids in batch: ")
            event("refused: duplicate call ids")
        return
    results = handle.results(timeout=90)
    assert [result.call_id for result in results] == ids
    # The ledger took the batch as sent (NUL characters, huge arguments and all).
    assert [row.call_id for row in runtime.ledger.calls(handle.batch_id)] == ids

    counted = marks(workspace, "probes") + marks(workspace, "effects")
    ran = Counter(mark["call_id"] for mark in counted)
    for call, result in zip(batch, results, strict=True):
        event(f"status: {result.status.value}")
        check_bounded(result, runtime.settings.result_max_bytes)
        spec = runtime.registry.get(call["name"])
        valid = spec is not None and not isinstance(
            validate(spec.input_model, call["arguments"]), Invalid
        )
        if not valid:
            assert result.status in (Status.unknown_tool, Status.invalid_arguments), result
        if spec is not None and spec.name in RUNS:
            assert ran[call["id"]] <= 1, f"{call['id']!r} ran {ran[call['id']]} times"
            assert ran[call["id"]] == 0 or (valid and result.ok), result
            assert result.ok <= bool(ran[call["id"]])
    for mark in counted:
        assert mark["call_id"] in ids


@pytest.mark.parametrize(
    "broken",
    [
        {"id": 7, "name": "probe", "arguments": {}},
        {"id": None, "name": "probe", "arguments": {}},
        {"name": "probe", "arguments": {}},
        {"id": "a", "name": None, "arguments": {}},
        {"id": "a", "name": ["probe"], "arguments": {}},
        {"id": "a", "name": "probe", "arguments": {}, "type": "tool_use"},
        "probe",
        None,
    ],
)
def test_a_call_that_is_not_a_call_object_refuses_the_batch_with_a_clear_message(
    fuzz_stack, broken
):
    runtime, base = fuzz_stack
    good = {"id": "ok", "name": "probe", "arguments": {"text": "x"}}
    with pytest.raises(InvalidBatch, match=r"call 1 of the batch is not a tool call"):
        runtime.submit([good, broken], mode="auto", workspace=base)
