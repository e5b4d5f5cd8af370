"""Rules in Claude Code's syntax: parsed loudly, and matched against each tool's
own subject (workspace paths where they really resolve, hosts of URLs)."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigurationError
from runtime.gate.decision import Effect
from runtime.gate.rules import Level, denying_reading, matching, parse, reading_denials


def rule(text: str, effect: Effect = Effect.allow):
    return parse(text, effect, Level.user, "user.json")


@pytest.mark.parametrize("text", ["", "write_file(", "write_file()", "a b", "x" * 65, 42])
def test_a_rule_that_cannot_be_parsed_is_an_error_naming_its_file(text):
    with pytest.raises(ConfigurationError, match="user.json: invalid allow rule"):
        rule(text)


def test_a_rule_names_its_tool_by_glob_and_keeps_its_text():
    parsed = rule(" mcp__notes__*(docs/**) ")
    assert (parsed.tool, parsed.specifier, parsed.text) == (
        "mcp__notes__*",
        "docs/**",
        "mcp__notes__*(docs/**)",
    )
    assert parsed.names("mcp__notes__read") and not parsed.names("write_file")


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("*.md", "docs/deep/notes.md", True),  # no slash: a name at any depth
        ("docs/*.md", "docs/deep/notes.md", False),  # `*` stays in one directory
        ("docs/**", "docs/deep/notes.md", True),
        ("docs", "docs/deep/notes.md", True),  # a plain path covers what is under it
        ("./src/**/*.py", "src/a/b/c.py", True),
        ("src/**/*.py", "src/c.py", True),
        ("secrets/x", "link/x", True),  # matched where the path really resolves
    ],
)
def test_path_specifiers_match_like_gitignore(tmp_path, pattern, path, hit):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "secrets")
    found = matching([rule(f"write_file({pattern})")], "write_file", "path", [path], tmp_path)
    assert bool(found) is hit


def test_an_allow_must_cover_every_path_and_a_deny_any(tmp_path):
    paths = ["docs/a.md", "src/b.py"]
    allow, deny = rule("write_file(docs/**)"), rule("write_file(docs/**)", Effect.deny)
    assert matching([allow], "write_file", "path", paths, tmp_path) == []
    assert matching([deny], "write_file", "path", paths, tmp_path) == [deny]


def test_host_specifiers_match_the_url_s_host_only(tmp_path):
    host = rule("http_get(*.example.com)")
    urls = {
        "https://api.example.com/v1": True,
        "https://example.com.evil.io/": False,
        "https://evil.io/?q=a.example.com": False,
        "not a url": False,
    }
    for url, hit in urls.items():
        assert bool(matching([host], "http_get", "url", [url], tmp_path)) is hit, url


def test_a_rule_without_specifier_covers_every_call_of_its_tool(tmp_path):
    bare = rule("write_file")
    assert matching([bare], "write_file", "path", ["anything"], tmp_path) == [bare]
    assert matching([bare], "edit_file", "path", ["anything"], tmp_path) == []


def test_the_deny_rules_of_the_reading_tools_bind_any_file_a_reading_tool_opens(tmp_path):
    (tmp_path / "secrets").mkdir()
    rules = [
        rule("read_file(.env)", Effect.deny),
        rule("search_files(secrets/**)", Effect.deny),
        rule("write_file(app.py)", Effect.deny),
        rule("read_file(*.md)", Effect.allow),
    ]
    denials = reading_denials(rules)
    assert [r.text for r in denials] == ["read_file(.env)", "search_files(secrets/**)"]
    assert denying_reading(denials, "sub/.env", tmp_path).text == "read_file(.env)"
    assert denying_reading(denials, str(tmp_path / "secrets" / "a"), tmp_path) is denials[1]
    assert denying_reading(denials, "app.py", tmp_path) is None
    assert denying_reading(reading_denials([rule("read_file", Effect.deny)]), "x", tmp_path)
