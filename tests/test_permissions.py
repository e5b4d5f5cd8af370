import pytest

from runtime.permissions import Effect, evaluate
from runtime.registry import Registry, ToolInput, tool
from runtime.types import Mode, Risk


class PathInput(ToolInput):
    path: str


def spec_for(risk: Risk):
    reg = Registry()

    @tool(name="t", risk=risk, paths=["path"], into=reg)
    def t(args: PathInput, ctx) -> str:
        return ""

    return reg.get("t")


TABLE = [
    (Mode.default, Risk.read, Effect.allow),
    (Mode.default, Risk.write, Effect.ask),
    (Mode.default, Risk.unknown, Effect.ask),
    (Mode.accept_edits, Risk.write, Effect.allow),
    (Mode.accept_edits, Risk.external, Effect.ask),
    (Mode.auto, Risk.write, Effect.allow),
    (Mode.auto, Risk.destructive, Effect.deny),
    (Mode.auto, Risk.unknown, Effect.deny),
    (Mode.bypass, Risk.external, Effect.allow),
    (Mode.bypass, Risk.destructive, Effect.deny),
    (Mode.bypass, Risk.unknown, Effect.ask),
]


@pytest.mark.parametrize(("mode", "risk", "effect"), TABLE)
def test_mode_and_risk_decide_when_no_rule_matches(tmp_path, mode, risk, effect):
    decision = evaluate(spec_for(risk), PathInput(path="a"), mode=mode, workspace=tmp_path)
    assert decision.effect is effect
    assert decision.rule == f"mode:{mode.value}"


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "~/.ssh/id_rsa", "a\x00b"])
def test_a_path_outside_the_workspace_is_denied_in_every_mode(tmp_path, path):
    for mode in (Mode.auto, Mode.bypass):
        decision = evaluate(
            spec_for(Risk.read), PathInput(path=path), mode=mode, workspace=tmp_path
        )
        assert decision.effect is Effect.deny
        assert decision.rule == "workspace"


def test_a_symlink_out_of_the_workspace_is_denied(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "link").symlink_to(tmp_path)
    decision = evaluate(
        spec_for(Risk.read),
        PathInput(path="link/secret"),
        mode=Mode.auto,
        workspace=tmp_path / "ws",
    )
    assert decision.effect is Effect.deny
