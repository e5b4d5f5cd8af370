"""Admission, steps 1–4 of a call, as client and worker both run it: each early
end is a `Refused` with the result the model reads and the ledger event that
says why; an `ask` waits for a human at the client and is denied at the worker."""

from __future__ import annotations

import pytest

from runtime.gate.admission import NAME_CHARS, Admitted, Refused, admit
from runtime.gate.decision import Effect
from runtime.ledger.store import EventKind
from runtime.results.formatter import SUMMARY_CHARS
from runtime.tools.loading import load_tools
from runtime.types import Mode, Status, ToolCall
from tests.support.messages import policy

REGISTRY = load_tools(["tests.support.tools"], mcp_servers_file=None)


@pytest.fixture
def ws(tmp_path):
    return tmp_path


def run(ws, name, arguments, mode=Mode.default, *, trusted=True, rules=None, **options):
    call = ToolCall(id="c1", name=name, arguments=arguments)
    return admit(
        call,
        registry=REGISTRY,
        mode=mode,
        workspace=ws,
        policy=policy(ws, trusted=trusted, **(rules or {})),
        **options,
    )


def test_an_unknown_tool_names_the_closest_ones(ws):
    refused = run(ws, "bumpp", {"label": "x"})
    assert isinstance(refused, Refused) and refused.spec is None
    assert (refused.result.status, refused.event) == (Status.unknown_tool, EventKind.lookup_failed)
    assert "Did you mean bump" in refused.result.model_message  # the registry is shared


def test_a_made_up_name_is_repeated_only_up_to_a_bound(ws):
    refused = run(ws, "x" * 10_000, {})
    assert "x" * NAME_CHARS + "…" in refused.result.model_message
    assert "x" * (NAME_CHARS + 1) not in refused.result.model_message


def test_invalid_arguments_name_every_bad_field(ws):
    refused = run(ws, "nap", {"label": 3, "seconds": -1, "extra": True})
    assert (refused.result.status, refused.event) == (
        Status.invalid_arguments,
        EventKind.invalid_arguments,
    )
    for field in ("label", "seconds", "extra"):
        assert field in refused.result.model_message


def test_a_side_effect_is_disabled_in_plan_mode_and_a_read_is_not(ws):
    refused = run(ws, "bump", {"label": "x"}, Mode.plan)
    assert (refused.result.status, refused.event) == (Status.disabled, EventKind.disabled)
    assert "disabled in plan mode" in refused.result.model_message
    assert isinstance(run(ws, "nap", {"label": "x"}, Mode.plan), Admitted)


def test_a_deny_rule_refuses_with_the_decision_that_did_it(ws):
    refused = run(ws, "bump", {"label": "x"}, Mode.bypass, rules={"deny": ["bump"]})
    assert (refused.result.status, refused.event) == (Status.denied, EventKind.decision)
    assert (refused.decision.effect, refused.decision.rule) == (Effect.deny, "bump")
    assert "a deny rule forbids this call (bump)" in refused.result.model_message


def test_an_ask_is_admitted_for_the_batch_to_ask_a_human(ws):
    admitted = run(ws, "bump", {"label": "x"})
    assert isinstance(admitted, Admitted)
    assert admitted.decision.effect is Effect.ask and admitted.arguments.label == "x"


def test_an_approval_turns_an_ask_into_an_allow_that_names_the_approver(ws):
    admitted = run(ws, "bump", {"label": "x"}, approved_by="alice", to_run=True)
    assert isinstance(admitted, Admitted)
    decision = admitted.decision
    assert (decision.effect, decision.source) == (Effect.allow, "approval:alice")
    assert decision.reason == "approved by alice" and decision.rule == "mode:default"


def test_the_worker_denies_an_ask_that_came_without_an_approval(ws):
    asked = run(ws, "bump", {"label": "x"}).decision
    refused = run(ws, "bump", {"label": "x"}, to_run=True)
    assert (refused.result.status, refused.decision.source) == (Status.denied, "worker")
    assert refused.decision.reason == f"{asked.reason}, and no approval came with it"
    assert refused.result.model_message == f"bump: denied: {refused.decision.reason}"


def test_an_approval_does_not_lift_a_deny(ws):
    refused = run(ws, "bump", {"label": "x"}, rules={"deny": ["bump"]}, approved_by="alice")
    assert isinstance(refused, Refused) and refused.decision.effect is Effect.deny


def test_an_untrusted_workspace_keeps_its_advice_on_one_screen_line(ws):
    deep = ws / ("a-rather-long-project-directory-name/" * 4)
    deep.mkdir(parents=True)
    refused = run(deep, "write_file", {"path": "NOTES.md", "content": "hi"}, trusted=False)
    summary = refused.result.summary
    assert refused.decision.rule == "workspace-trust" and len(summary) <= SUMMARY_CHARS
    assert summary.endswith("with `toolrun trust DIR`…")
    assert str(deep.resolve()) in refused.result.model_message  # the model still reads it whole
