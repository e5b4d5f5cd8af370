"""The permission gate, table-driven: modes × risks × rule levels × specifiers,
each case asserting the decision and the rule that made it."""

from pathlib import Path

import pytest

from runtime.gate.decision import Effect
from runtime.gate.permissions import evaluate
from runtime.gate.policy import Policy
from runtime.gate.rules import Level, parse
from runtime.registry.capabilities import CapabilitySpec, Registry, ToolInput
from runtime.types import Mode, Risk

A, Q, D = Effect.allow, Effect.ask, Effect.deny


class PathIn(ToolInput):
    path: str


class UrlIn(ToolInput):
    url: str


class Nothing(ToolInput):
    pass


REG = Registry()
for name, risk, model, extra in [
    ("rf", Risk.read, PathIn, {"paths": ("path",)}),
    ("wf", Risk.write, PathIn, {"paths": ("path",)}),
    ("net", Risk.external, UrlIn, {"subject": ("url", "url")}),
    ("rm", Risk.destructive, Nothing, {}),
    ("unk", Risk.unknown, Nothing, {}),
    ("appr", Risk.write, Nothing, {"requires_approval": True}),
]:
    REG.register(CapabilitySpec(name, "", model, lambda args, ctx: "", risk=risk, **extra))

ARGS = {
    "rf": {"path": "src/app.py"},
    "wf": {"path": "docs/readme.md"},
    "net": {"url": "https://api.example.com/v1"},
    "rm": {},
    "unk": {},
    "appr": {},
}


def decide(ws: Path, tool_name, mode, rules=(), *, trusted=True, roots=None, args=None):
    parsed = tuple(
        parse(text, Effect(effect), Level[level], f"{level}.json") for level, effect, text in rules
    )
    policy = Policy(parsed, trusted, roots, str(ws), "v")
    spec = REG.get(tool_name)
    arguments = spec.input_model(**(args or ARGS[tool_name]))
    return evaluate(spec, arguments, mode=Mode(mode), workspace=ws, policy=policy)


MODE_CASES = [
    ("plan", "rf", A),
    ("plan", "wf", D),
    ("plan", "net", D),
    ("plan", "rm", D),
    ("plan", "unk", D),
    ("default", "rf", A),
    ("default", "wf", Q),
    ("default", "net", Q),
    ("default", "rm", Q),
    ("default", "unk", Q),
    ("accept_edits", "rf", A),
    ("accept_edits", "wf", A),
    ("accept_edits", "net", Q),
    ("accept_edits", "rm", Q),
    ("accept_edits", "unk", Q),
    ("auto", "rf", A),
    ("auto", "wf", D),
    ("auto", "net", D),
    ("auto", "rm", D),
    ("auto", "unk", D),
    ("bypass", "rf", A),
    ("bypass", "wf", A),
    ("bypass", "net", A),
    ("bypass", "rm", D),
    ("bypass", "unk", Q),
    ("default", "appr", Q),
    ("accept_edits", "appr", Q),
    ("bypass", "appr", Q),
]


@pytest.mark.parametrize(("mode", "name", "effect"), MODE_CASES)
def test_mode_and_risk_decide_when_no_rule_matches(tmp_path, mode, name, effect):
    decision = decide(tmp_path, name, mode)
    assert decision.effect is effect
    if name == "unk" and mode != "plan":
        assert decision.rule == "risk:unknown"
    elif name == "appr" and mode != "default":
        assert decision.rule == "requires_approval"
    else:
        assert decision.rule == f"mode:{mode}"


# (mode, tool, rules as (level, effect, text), args or None, effect, deciding rule)
RULE_CASES = [
    # allow rules lift the mode's answer
    ("default", "wf", [("user", "allow", "wf")], None, A, "wf"),
    ("auto", "wf", [("batch", "allow", "wf(docs/**)")], None, A, "wf(docs/**)"),
    ("auto", "wf", [("batch", "allow", "wf(src/**)")], None, D, "mode:auto"),
    ("auto", "wf", [("project", "allow", "wf(*.md)")], None, A, "wf(*.md)"),
    ("auto", "wf", [("project", "allow", "wf(*.py)")], None, D, "mode:auto"),
    ("auto", "wf", [("user", "allow", "wf(docs/*.md)")], None, A, "wf(docs/*.md)"),
    ("auto", "wf", [("user", "allow", "wf(/docs/**)")], None, D, "mode:auto"),
    ("auto", "wf", [("user", "allow", "w*")], None, A, "w*"),
    ("auto", "net", [("org", "allow", "net(*.example.com)")], None, A, "net(*.example.com)"),
    (
        "auto",
        "net",
        [("org", "allow", "net(domain:api.example.com)")],
        None,
        A,
        "net(domain:api.example.com)",
    ),
    ("auto", "net", [("org", "allow", "net(*.example.org)")], None, D, "mode:auto"),
    ("default", "rm", [("user", "allow", "rm")], None, A, "rm"),
    ("bypass", "rm", [("batch", "allow", "rm")], None, A, "rm"),
    ("default", "appr", [("user", "allow", "appr")], None, A, "appr"),
    # deny beats ask beats allow, whatever the level
    ("bypass", "wf", [("user", "deny", "wf(docs/**)")], None, D, "wf(docs/**)"),
    ("bypass", "wf", [("org", "deny", "wf"), ("batch", "allow", "wf")], None, D, "wf"),
    ("auto", "wf", [("batch", "deny", "wf"), ("org", "allow", "wf")], None, D, "wf"),
    ("auto", "wf", [("org", "ask", "wf"), ("user", "allow", "wf")], None, D, "wf"),
    ("default", "wf", [("org", "ask", "wf"), ("user", "allow", "wf")], None, Q, "wf"),
    ("default", "wf", [("user", "ask", "wf(*.md)"), ("org", "allow", "wf")], None, Q, "wf(*.md)"),
    ("accept_edits", "wf", [("project", "ask", "wf(docs/**)")], None, Q, "wf(docs/**)"),
    ("default", "rf", [("project", "deny", "rf(src/**)")], None, D, "rf(src/**)"),
    ("default", "rf", [("project", "deny", "rf(*.py)")], None, D, "rf(*.py)"),
    ("default", "rf", [("project", "deny", "rf(lib/**)")], None, A, "mode:default"),
    ("default", "rf", [("user", "ask", "rf(src/**)")], None, Q, "rf(src/**)"),
    ("auto", "rf", [("user", "ask", "rf(src/**)")], None, D, "rf(src/**)"),
    ("plan", "rf", [("org", "deny", "rf")], None, D, "rf"),
    ("bypass", "net", [("batch", "deny", "net(*.example.com)")], None, D, "net(*.example.com)"),
    # the highest level's rule is the one reported
    ("default", "wf", [("user", "deny", "wf(*.md)"), ("org", "deny", "wf")], None, D, "wf"),
    (
        "default",
        "wf",
        [("batch", "allow", "wf"), ("project", "allow", "wf(docs/**)")],
        None,
        A,
        "wf(docs/**)",
    ),
    # a deny on any of the paths a rule names; allow must cover the path
    (
        "auto",
        "wf",
        [("batch", "allow", "wf(docs/**)")],
        {"path": "docs/a/b/c.md"},
        A,
        "wf(docs/**)",
    ),
    (
        "auto",
        "wf",
        [("batch", "allow", "wf(docs/**)")],
        {"path": "docs/../src/x.md"},
        D,
        "mode:auto",
    ),
    ("auto", "wf", [("batch", "allow", "wf(docs/*)")], {"path": "docs/a/b.md"}, D, "mode:auto"),
    ("auto", "wf", [("batch", "allow", "wf(**/*.md)")], {"path": "a/b/c.md"}, A, "wf(**/*.md)"),
    ("default", "rf", [("org", "deny", "rf(.env)")], {"path": "sub/.env"}, D, "rf(.env)"),
    (
        "default",
        "rf",
        [("org", "deny", "rf(secrets/**)")],
        {"path": "./secrets/../secrets/k"},
        D,
        "secrets/**",
    ),
    # unknown risk always asks, even under an allow rule; deny still wins
    ("default", "unk", [("user", "allow", "unk")], None, Q, "risk:unknown"),
    ("bypass", "unk", [("org", "allow", "unk")], None, Q, "risk:unknown"),
    ("auto", "unk", [("org", "allow", "unk")], None, D, "risk:unknown"),
    ("default", "unk", [("user", "deny", "unk")], None, D, "unk"),
]


@pytest.mark.parametrize(("mode", "name", "rules", "args", "effect", "rule"), RULE_CASES)
def test_rules_across_levels(tmp_path, mode, name, rules, args, effect, rule):
    decision = decide(tmp_path, name, mode, rules, args=args)
    assert decision.effect is effect
    assert rule in decision.rule


def test_the_decision_names_the_file_of_its_rule(tmp_path):
    decision = decide(tmp_path, "wf", "auto", [("project", "allow", "wf")])
    assert decision.source == "project.json"


TRUST_CASES = [
    ("accept_edits", "rf", [], A, "mode:accept_edits"),
    ("accept_edits", "wf", [], D, "workspace-trust"),
    ("bypass", "net", [], D, "workspace-trust"),
    ("default", "wf", [("user", "allow", "wf")], D, "workspace-trust"),
    ("default", "wf", [("org", "allow", "wf")], A, "wf"),
    ("default", "wf", [("org", "allow", "wf"), ("user", "deny", "wf")], D, "wf"),
]


@pytest.mark.parametrize(("mode", "name", "rules", "effect", "rule"), TRUST_CASES)
def test_an_untrusted_workspace_runs_only_reads_unless_org_says_so(
    tmp_path, mode, name, rules, effect, rule
):
    decision = decide(tmp_path, name, mode, rules, trusted=False)
    assert (decision.effect, decision.rule) == (effect, rule)


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "~/.ssh/id_rsa", "a\x00b"])
@pytest.mark.parametrize("mode", ["auto", "bypass"])
def test_a_path_outside_the_workspace_is_denied_whatever_the_rules(tmp_path, path, mode):
    decision = decide(tmp_path, "rf", mode, [("org", "allow", "rf")], args={"path": path})
    assert (decision.effect, decision.rule) == (D, "workspace")


def test_a_symlink_out_of_the_workspace_is_denied(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "link").symlink_to(tmp_path)
    decision = decide(tmp_path / "ws", "rf", "auto", args={"path": "link/secret"})
    assert (decision.effect, decision.rule) == (D, "workspace")


@pytest.mark.parametrize(
    "path", [".toolrun/settings.json", ".TOOLRUN/settings.json", "a/../.toolrun/x"]
)
def test_no_rule_lets_a_tool_write_a_settings_file(tmp_path, path):
    decision = decide(tmp_path, "wf", "bypass", [("org", "allow", "wf")], args={"path": path})
    assert (decision.effect, decision.rule) == (D, "workspace")


@pytest.mark.parametrize(
    "path", [".toolrun/stack.json", ".TOOLRUN/ledger.db", "a/../.toolrun/logs/worker.log"]
)
def test_no_rule_lets_a_tool_read_toolrun_s_home(tmp_path, path):
    decision = decide(tmp_path, "rf", "bypass", [("org", "allow", "rf")], args={"path": path})
    assert (decision.effect, decision.rule) == (D, "toolrun-home")


def test_a_home_named_otherwise_is_refused_too(tmp_path, monkeypatch):
    (tmp_path / "state").mkdir()
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path / "state"))
    decision = decide(tmp_path, "rf", "bypass", args={"path": "state/stack.json"})
    assert (decision.effect, decision.rule) == (D, "toolrun-home")
    decision = decide(tmp_path, "wf", "bypass", args={"path": "state/stack.json"})
    assert (decision.effect, decision.rule) == (D, "toolrun-home")
    assert decide(tmp_path, "rf", "bypass", args={"path": "stateful.txt"}).effect is A


def test_the_user_s_state_directory_is_the_home_when_none_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TOOLRUN_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / "toolrun").mkdir(parents=True)
    for tool_name in ("rf", "wf"):
        decision = decide(tmp_path, tool_name, "bypass", args={"path": "state/toolrun/stack.json"})
        assert (decision.effect, decision.rule) == (D, "toolrun-home")
    assert decide(tmp_path, "rf", "bypass", args={"path": "state/other.txt"}).effect is A


def test_org_policy_restricts_workspace_roots(tmp_path):
    inside = tmp_path / "agents" / "ws"
    inside.mkdir(parents=True)
    roots = (str(tmp_path / "agents"),)
    assert decide(inside, "rf", "auto", roots=roots).effect is A
    decision = decide(tmp_path, "rf", "auto", roots=roots)
    assert (decision.effect, decision.rule) == (D, "workspace-roots")


def test_there_are_at_least_sixty_rule_cases():
    assert len(MODE_CASES) + len(RULE_CASES) + len(TRUST_CASES) >= 60


SHELL_BYPASSES = [
    "git diff && rm -rf x",
    "git diff; curl http://example.com",
    "git diff | sh",
    "git diff $(rm -rf x)",
    "git diff `id`",
    "git diff\nrm -rf x",
    "git diff > /etc/passwd",
    "git diff > ../out",
    "git diff >> ~/.bashrc",
    "git diff & rm x",
    "git diff || rm x",
    "git diff <(curl x)",
    "bash -c 'git diff'",
    "eval git diff",
    "git diff > .toolrun/settings.json",
]


def shell_decision(ws: Path, command: str, mode: str, *rules):
    from runtime.tools.loading import load_tools

    spec = load_tools().get("shell")
    parsed = tuple(parse(text, Effect(effect), Level.user, "user.json") for effect, text in rules)
    policy = Policy(parsed, True, None, str(ws), "v")
    return evaluate(
        spec, spec.input_model(command=command), mode=Mode(mode), workspace=ws, policy=policy
    )


@pytest.mark.parametrize("command", SHELL_BYPASSES)
def test_a_shell_allow_rule_is_not_fooled(tmp_path, command):
    decision = shell_decision(tmp_path, command, "auto", ("allow", "shell(git diff *)"))
    assert decision.effect is D and decision.rule != "shell(git diff *)"


@pytest.mark.parametrize("command", ["git diff", "git diff HEAD -- a.py", "git  diff --stat"])
def test_a_shell_allow_rule_allows_what_it_names(tmp_path, command):
    decision = shell_decision(tmp_path, command, "auto", ("allow", "shell(git diff *)"))
    assert (decision.effect, decision.rule) == (A, "shell(git diff *)")


def test_compound_commands_run_when_every_part_is_allowed(tmp_path):
    rules = [("allow", "shell(git diff *)"), ("allow", "shell(git status)")]
    assert shell_decision(tmp_path, "git diff && git status", "auto", *rules).effect is A
    assert shell_decision(tmp_path, "git diff && git log", "auto", *rules).effect is D


def test_an_ask_rule_on_one_part_asks_for_the_whole_command(tmp_path):
    rules = [("allow", "shell(git *)"), ("ask", "shell(git push *)")]
    decision = shell_decision(tmp_path, "git status && git push origin", "default", *rules)
    assert (decision.effect, decision.rule) == (Q, "shell(git push *)")


def test_a_deny_rule_on_any_part_denies(tmp_path):
    decision = shell_decision(
        tmp_path, "ls && rm -rf x", "bypass", ("allow", "shell"), ("deny", "shell(rm *)")
    )
    assert (decision.effect, decision.rule) == (D, "shell(rm *)")


OFFER_RULES = [
    (),
    (("batch", "deny", "rf"),),
    (("batch", "allow", "wf(docs/**)"),),
    (("org", "allow", "wf"),),
    (("user", "ask", "rm"),),
    (("project", "deny", "rf(src/**)"),),
]


def offer(ws: Path, tool_name, mode, rules=(), *, trusted=True):
    from runtime.gate.permissions import offered

    parsed = tuple(
        parse(text, Effect(effect), Level[level], f"{level}.json") for level, effect, text in rules
    )
    return offered(REG.get(tool_name), Mode(mode), Policy(parsed, trusted, None, str(ws), "v"))


def test_tools_offered_in_a_mode_are_those_the_gate_can_run(tmp_path):
    offered_in = {mode: sorted(n for n in ARGS if offer(tmp_path, n, mode)) for mode in Mode}
    assert offered_in[Mode.plan] == ["rf"]
    assert offered_in[Mode.auto] == ["rf"]  # writes need a rule; unknown risk always asks
    assert offered_in[Mode.default] == sorted(ARGS)
    assert not offer(tmp_path, "rf", "default", [("batch", "deny", "rf")])
    assert offer(tmp_path, "wf", "auto", [("batch", "allow", "wf(docs/**)")])
    assert not offer(tmp_path, "wf", "default", trusted=False)
    assert offer(tmp_path, "wf", "auto", [("org", "allow", "wf")], trusted=False)


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("rules", OFFER_RULES)
@pytest.mark.parametrize("trusted", [True, False])
def test_a_tool_left_out_of_the_offer_is_one_the_gate_denies(tmp_path, mode, rules, trusted):
    for name in ARGS:
        if not offer(tmp_path, name, mode, rules, trusted=trusted):
            decision = decide(tmp_path, name, mode, rules, trusted=trusted)
            assert decision.effect is D, (name, decision)


def test_definitions_in_plan_mode_offer_read_only_tools():
    from runtime import adapters

    names = [d["name"] for d in adapters.definitions(REG, "anthropic", mode="plan")]
    assert names == ["rf"]
    assert len(adapters.definitions(REG, "openai")) == len(ARGS)  # without a mode: every tool


def test_a_workspace_made_inside_the_home_is_read_as_any_other(tmp_path, monkeypatch):
    """`toolrun demo` makes its workspace in the home; that workspace holds no state."""
    (tmp_path / "demo-workspace").mkdir()
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path))
    decision = decide(tmp_path / "demo-workspace", "rf", "auto", args={"path": "README.md"})
    assert decision.effect is A
    decision = decide(tmp_path, "rf", "auto", args={"path": "demo-workspace/README.md"})
    assert (decision.effect, decision.rule) == (D, "toolrun-home")


# --- git's configuration and hooks, shell rc files ----------------------------------

PROTECTED = [
    ".git/config",
    ".git/hooks/pre-commit",
    "sub/.git/config",
    ".GIT/Config",
    "a/../.git/hooks/x",
    ".git",
    ".gitmodules",
    "vendor/lib/.gitmodules",
    ".bashrc",
    "home/.zshrc",
    ".profile",
    ".bash_logout",
    ".config/git/config",
]


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize(
    ("mode", "effect"), [("default", Q), ("accept_edits", Q), ("auto", D), ("bypass", A)]
)
def test_a_write_to_git_s_configuration_or_a_shell_rc_file_asks_whatever_allows_it(
    tmp_path, path, mode, effect
):
    rules = [("org", "allow", "wf"), ("user", "allow", "wf(**)")]
    decision = decide(tmp_path, "wf", mode, rules, args={"path": path})
    assert decision.effect is effect
    if mode != "bypass":
        assert decision.rule == "protected-file" and "approval" in decision.reason


def test_a_symlink_to_git_s_configuration_asks_too(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "cfg").symlink_to(tmp_path / ".git" / "config")
    (tmp_path / "g").symlink_to(tmp_path / ".git", target_is_directory=True)
    for path in ("cfg", "g/hooks/post-checkout", str(tmp_path / "g" / "config")):
        decision = decide(tmp_path, "wf", "accept_edits", args={"path": path})
        assert (decision.effect, decision.rule) == (Q, "protected-file"), path


@pytest.mark.parametrize("path", [".gitignore", ".github/workflows/ci.yml", "bashrc", "git/config"])
def test_files_named_near_them_are_written_as_any_other(tmp_path, path):
    assert decide(tmp_path, "wf", "accept_edits", args={"path": path}).effect is A


def test_a_deny_rule_still_beats_the_protected_file_ask(tmp_path):
    decision = decide(tmp_path, "wf", "default", [("user", "deny", "wf")], args={"path": ".bashrc"})
    assert (decision.effect, decision.rule) == (D, "wf")


def test_reading_git_s_configuration_needs_nothing(tmp_path):
    assert decide(tmp_path, "rf", "auto", args={"path": ".git/config"}).effect is A


@pytest.mark.parametrize(
    "command",
    [
        "git diff > .git/config",
        "git diff >> sub/.git/hooks/pre-push",
        "cd sub && git diff > .zshrc",
    ],
)
def test_a_shell_redirect_into_them_asks_whatever_allows_it(tmp_path, command):
    (tmp_path / "sub").mkdir()
    rule = ("allow", "shell(git diff *)")
    decision = shell_decision(tmp_path, command, "default", rule, ("allow", "shell(cd *)"))
    assert (decision.effect, decision.rule) == (Q, "protected-file")
    assert shell_decision(tmp_path, command, "auto", rule).effect is D


# --- flags that escape a rule's glob ------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("git diff --output=/tmp/x HEAD", "'--output=/tmp/x'"),
        ("git diff --output ../x HEAD", "'--output'"),
        ("git diff --ext-diff", "'--ext-diff'"),
        ("git diff *", "'*'"),
    ],
)
def test_an_escaping_flag_falls_to_the_mode_and_the_reason_names_it(tmp_path, command, named):
    rule = ("allow", "shell(git diff *)")
    decision = shell_decision(tmp_path, command, "accept_edits", rule)
    assert (decision.effect, decision.rule) == (Q, "mode:accept_edits")
    assert named in decision.reason and "spells the flag out" in decision.reason
    assert shell_decision(tmp_path, command, "auto", rule).effect is D


def test_git_s_config_flag_escapes_any_git_rule(tmp_path):
    command = "git -c core.fsmonitor='id > out.txt; false' diff"
    decision = shell_decision(tmp_path, command, "default", ("allow", "shell(git *)"))
    assert (
        decision.effect is Q and "'-c'" in decision.reason and "core.fsmonitor" in decision.reason
    )
