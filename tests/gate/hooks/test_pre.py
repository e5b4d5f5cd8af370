"""Pre hooks judging admitted calls, in process with Python callables (the
other kinds through real processes: tests/integration/test_hooks.py): a hook
tightens, only an org hook lifts an ask, no hook weakens a deny, a replaced
argument goes through the whole gate again, and a failure fails closed or open."""

from __future__ import annotations

import dataclasses

import pytest

from runtime.gate.admission import Admitted, Refused, admit
from runtime.gate.decision import Effect
from runtime.gate.hooks import pre
from runtime.gate.hooks.declaration import Hook
from runtime.redaction.redactor import BUILT_IN
from runtime.tools.loading import load_tools
from runtime.types import Mode, Status, ToolCall
from tests.support.messages import policy

REGISTRY = load_tools(["tests.support.tools"], mcp_servers_file=None)
SEEN: list[dict] = []
SECRET = "ghp_" + "a1B2" * 9


def answer_allow(request):
    SEEN.append(request)
    return {"decision": "allow", "reason": "known"}


def answer_ask(request):
    return {"decision": "ask", "reason": "look"}


def answer_deny(request):
    return {"decision": "deny", "reason": "no"}


def answer_secret_path(request):
    return {"arguments": {**request["arguments"], "path": "secret/x.md"}}


def answer_crash(request):
    raise RuntimeError("down")


def hook(function, level="org", **options):
    return Hook(
        name=function,
        when="pre",
        kind="python",
        target=f"{__name__}:{function}",
        level=level,
        source=f"{level}.json",
        **options,
    )


def screened(ws, name, arguments, *hooks, mode=Mode.default, **rules):
    base = dataclasses.replace(policy(ws, **rules), hooks=hooks, submitter="ana")
    call = ToolCall(id="c1", name=name, arguments=arguments)
    admission = admit(call, registry=REGISTRY, mode=mode, workspace=ws, policy=base)
    gate = pre.Gate(REGISTRY, mode, ws, base, "b1", b"k" * 32, BUILT_IN, 1 << 20)
    return pre.screen(admission, gate)


def test_an_org_hook_lifts_an_ask_and_the_message_carries_it_as_the_approval(tmp_path):
    SEEN.clear()
    found = screened(tmp_path, "bump", {"label": SECRET}, hook("answer_allow"))
    assert isinstance(found.admission, Admitted)
    assert found.admission.decision.effect is Effect.allow
    assert found.admission.approved_by == "hook:answer_allow"
    (request,) = SEEN
    assert request["decision"]["effect"] == "ask" and request["submitter"] == "ana"
    assert SECRET not in str(request) and request["risk"] == "write"


def test_a_user_hook_cannot_lift_an_ask(tmp_path):
    found = screened(tmp_path, "bump", {"label": "x"}, hook("answer_allow", level="user"))
    assert found.admission.decision.effect is Effect.ask and found.admission.approved_by is None


def test_an_unredacted_hook_sees_the_arguments_as_sent(tmp_path):
    SEEN.clear()
    screened(tmp_path, "bump", {"label": SECRET}, hook("answer_allow", redact=False))
    assert SEEN[0]["arguments"] == {"label": SECRET}


@pytest.mark.parametrize("level", ["org", "project", "user"])
def test_any_level_s_hook_tightens(tmp_path, level):
    asked = screened(tmp_path, "echo", {"text": "x"}, hook("answer_ask", level=level))
    assert asked.admission.decision.effect is Effect.ask
    assert asked.admission.decision.rule == "hook:answer_ask"
    denied = screened(tmp_path, "echo", {"text": "x"}, hook("answer_deny", level=level))
    assert isinstance(denied.admission, Refused)
    assert denied.admission.result.model_message == "echo: denied: hook 'answer_deny': no"


def test_no_hook_sees_a_call_the_rules_deny(tmp_path):
    SEEN.clear()
    found = screened(tmp_path, "bump", {"label": "x"}, hook("answer_allow"), deny=["bump"])
    assert isinstance(found.admission, Refused) and found.consulted == () and SEEN == []


def test_a_replaced_argument_goes_through_the_gate_again(tmp_path):
    rules = {"allow": ["write_file"], "deny": ["write_file(secret/**)"]}
    arguments = {"path": "ok.md", "content": "x"}
    found = screened(tmp_path, "write_file", arguments, hook("answer_secret_path"), **rules)
    assert isinstance(found.admission, Refused)
    assert found.admission.decision.effect is Effect.deny
    assert "secret" in found.admission.decision.rule


def test_the_first_deny_ends_the_hooks(tmp_path):
    found = screened(tmp_path, "echo", {"text": "x"}, hook("answer_deny"), hook("answer_allow"))
    assert [c.hook.name for c in found.consulted] == ["answer_deny"]


def test_a_failing_hook_fails_closed_or_open(tmp_path):
    closed = screened(tmp_path, "echo", {"text": "x"}, hook("answer_crash"))
    assert closed.admission.result.status is Status.denied
    assert "RuntimeError: down" in closed.admission.result.model_message
    opened = screened(tmp_path, "echo", {"text": "x"}, hook("answer_crash", on_failure="open"))
    assert opened.admission.decision.effect is Effect.allow
    assert opened.consulted[0].detail()["on_failure"] == "open"


def test_a_hook_that_cannot_be_imported_fails(tmp_path):
    missing = dataclasses.replace(hook("answer_allow"), target="no_such_module:check")
    found = screened(tmp_path, "echo", {"text": "x"}, missing)
    assert "cannot import no_such_module:check" in found.admission.result.model_message


def test_asking_in_auto_mode_denies(tmp_path):
    found = screened(tmp_path, "echo", {"text": "x"}, hook("answer_ask"), mode=Mode.auto)
    assert "auto mode has nobody to ask: look" in found.admission.result.model_message


def test_a_hook_row_names_the_hook_and_its_latency(tmp_path):
    found = screened(tmp_path, "echo", {"text": "x"}, hook("answer_deny"))
    row = pre.event("b1", "c1", found.consulted[0], BUILT_IN)
    assert (row["kind"], row["rule"], row["reason"]) == ("hook", "hook:answer_deny", "no")
    assert row["effect"] is None and row["detail"]["latency_ms"] >= 0


def test_an_org_hook_lifts_no_ask_rule_and_no_protected_file(tmp_path):
    ruled = screened(tmp_path, "bump", {"label": "x"}, hook("answer_allow"), ask=["bump"])
    assert ruled.admission.decision.effect is Effect.ask and ruled.admission.approved_by is None
    arguments = {"path": ".git/hooks/pre-commit", "content": "x"}
    guarded = screened(
        tmp_path, "write_file", arguments, hook("answer_allow"), allow=["write_file"]
    )
    assert guarded.admission.decision.rule == "protected-file"


def test_a_later_hook_s_allow_does_not_lift_an_earlier_hook_s_ask(tmp_path):
    found = screened(tmp_path, "echo", {"text": "x"}, hook("answer_ask"), hook("answer_allow"))
    assert found.admission.decision.rule == "hook:answer_ask"
