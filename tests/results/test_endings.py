"""Every terminal result no tool produced: its status, its error kind, and
wording that tells the model whether the call did not run or may have run."""

from __future__ import annotations

import pytest

from runtime.results import endings
from runtime.types import Mode, Status, ToolCall

CALL = ToolCall(id="c1", name="bump", arguments={})
FAILED = ToolCall(id="w0", name="explode", arguments={})

DID_NOT_RUN = [
    (endings.cancelled_before_start("c1", "bump"), Status.cancelled, "cancelled"),
    (endings.skipped_after("c1", "bump", FAILED), Status.skipped, "skipped"),
    (endings.skipped_at_deadline("c1", "bump"), Status.skipped, "skipped"),
    (endings.ledger_unavailable("c1", "bump"), Status.error, "ledger"),
    (endings.broker_unreachable("c1", "bump"), Status.error, "broker"),
    (endings.chain_broken("c1", "bump"), Status.error, "broker"),
    (endings.unrecorded("c1", "bump"), Status.denied, "unrecorded"),
]
MAY_HAVE_RUN = [
    (endings.worker_lost("c1", "bump"), "worker_lost"),
    (endings.cancelled_while_running("c1", "bump", read=False), "outcome_unknown"),
    (endings.past_deadline("c1", "bump", read=False), "outcome_unknown"),
]


@pytest.mark.parametrize(("result", "status", "kind"), DID_NOT_RUN)
def test_an_end_before_the_tool_says_it_did_not_run(result, status, kind):
    assert (result.status, result.error.kind) == (status, kind)
    assert "not run" in result.model_message or "did not run" in result.model_message
    assert "may or may not" not in result.model_message


@pytest.mark.parametrize(("result", "kind"), MAY_HAVE_RUN)
def test_a_side_effect_of_unknown_fate_says_to_check_before_calling_again(result, kind):
    assert (result.status, result.error.kind) == (Status.outcome_unknown, kind)
    assert "may or may not" in result.model_message
    assert result.model_message.endswith(endings.CHECK_FIRST)


@pytest.mark.parametrize("ending", [endings.cancelled_while_running, endings.past_deadline])
def test_an_abandoned_read_is_not_an_unknown_outcome(ending):
    result = ending("c1", "nap", read=True)
    assert result.status in (Status.cancelled, Status.timeout)
    assert "abandoned" in result.model_message and "may or may not" not in result.model_message


def test_refusals_at_admission_say_what_to_change():
    unknown = endings.unknown_tool("c1", "bumpp", close=["bump"], available=["bump", "nap"])
    assert unknown.model_message == (
        "bumpp: unknown tool 'bumpp'. Did you mean bump? Available tools: bump, nap"
    )
    assert "Did you mean" not in endings.unknown_tool("c1", "zz", close=[], available=[]).summary
    invalid = endings.invalid_arguments("c1", "bump", "label: field required")
    assert (invalid.status, invalid.model_message) == (
        Status.invalid_arguments,
        "bump: invalid arguments: label: field required",
    )
    disabled = endings.disabled("c1", "bump", Mode.plan)
    assert disabled.status is Status.disabled and "only read-only tools run" in disabled.summary
    denied = endings.denied("c1", "bump", "a deny rule forbids this call (bump)")
    assert (denied.status, denied.error.kind) == (Status.denied, "denied")


def test_a_notice_of_approval_is_its_own_status():
    notice = endings.awaiting_approval("c1", "bump", "write tools need approval")
    assert notice.status is Status.awaiting_approval
    assert notice.model_message == "bump: awaiting approval: write tools need approval"


def test_given_up_and_timed_out_say_what_happened_and_carry_the_call_s_facts():
    given_up = endings.given_up("c1", "bump", 3, worker="w@h", attempts=3)
    assert (given_up.status, given_up.error.kind, given_up.worker) == (
        Status.error,
        "worker_lost",
        "w@h",
    )
    assert "delivered 3 times" in given_up.model_message
    timed_out = endings.timed_out("c1", "nap", 2.5, duration_ms=2500.0)
    assert timed_out.status is Status.timeout and "timed out after 2.5 s" in timed_out.summary


def test_a_runtime_failure_names_the_exception_type_only():
    result = endings.runtime_failed("c1", "bump", KeyError("sk-secret-detail"))
    assert result.status is Status.outcome_unknown and "(KeyError)" in result.model_message
    assert "sk-secret-detail" not in result.model_message


def test_what_a_batch_picks_for_a_call_abandoned_while_it_ran():
    assert endings.abandoned(CALL, read=False, cancelled=True).status is Status.outcome_unknown
    assert endings.abandoned(CALL, read=True, cancelled=True).status is Status.cancelled
    assert endings.abandoned(CALL, read=True, cancelled=False).status is Status.timeout
    late = endings.abandoned(CALL, read=False, cancelled=False)
    assert late.status is Status.outcome_unknown and "batch deadline" in late.model_message
