"""What the read-only file tools show of a secret: no more than its marker
(docs/architecture.md, "Secrets"). Matching runs on the redacted text, every
bound is applied after redaction, a window is redacted with the lines around
it, and toolrun's own home is not read at all."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.errors import PathOutsideWorkspace
from runtime.execution.executor import execute
from runtime.ledger.store import Ledger
from runtime.redaction import Redactor
from runtime.registry.capabilities import ToolContext, ToolOutput, registry
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import CallMessage, Mode, Status
from tests.support.messages import KEY as SIGNING_KEY
from tests.support.messages import message

KEY = "AKIAZ3MHQ7WJXK4PLR2D"  # a made-up AWS access key id (AKIA + 16 of A-Z2-7)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAtGh7mZ2qlLWmQx1nB5kQvFZ3bR8yN0cA4eT9uJ6pD2sK1wX\n"
    "Hn3VbQ8yZ5mC1tL4pX7eR2sK9wJ6uD0fA3gB8hN5vM1cQ4rT7yE2iO9pU6aS3d\n"
    "F0gH5jK8lZ1xC4vB7nM2qW9eR6tY3uI0oP5aS8dF1gH4jK7lZ0xC3vB6nM9qW2\n"
    "-----END RSA PRIVATE KEY-----\n"
)
BODY = PEM.splitlines()[1:4]


def run(tool: str, workspace: Path, max_bytes: int = 32 * 1024, redactor=None, **args):
    spec = registry.get(tool)
    extra = {"redactor": redactor} if redactor is not None else {}
    ctx = ToolContext(workspace=workspace, batch_id="b", call_id="c", max_bytes=max_bytes, **extra)
    return spec.execute(spec.input_model(**args), ctx)


def shown(out: ToolOutput) -> str:
    """Everything a result carries as text."""
    return json.dumps(out.content, ensure_ascii=False) + out.message + out.summary


def pieces(secret: str, size: int = 8) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_hidden(out: ToolOutput, secret: str, size: int = 8) -> None:
    text = shown(out)
    assert not [p for p in pieces(secret, size) if p in text], text[:2000]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "creds.ini").write_text(f"[default]\nregion = eu-west-1\nkey_id = {KEY}\n")
    return root


# --- matching is an oracle only of what read_file shows -----------------------


def test_a_pattern_cannot_match_into_a_secret_the_marker_hides(ws: Path) -> None:
    shows = run("read_file", ws, path="creds.ini").content["text"]
    assert KEY not in shows and "[REDACTED:aws_access_key]" in shows
    assert run("search_files", ws, pattern="AKIA", path="creds.ini").content["matches"] == []
    assert run("search_files", ws, pattern=KEY[:6], path="creds.ini").content["matches"] == []
    found = run("search_files", ws, pattern=r"REDACTED:aws", path="creds.ini").content
    assert [m["line"] for m in found["matches"]] == [3]


def test_no_sequence_of_searches_recovers_more_of_a_key_than_its_marker(ws: Path) -> None:
    """The reviewer's attack, one character at a time: a search that matches
    says the next character; on redacted text none ever does."""
    alphabet = string.ascii_uppercase + "234567"
    known = "AKIA"
    for _ in range(len(KEY) - 4):
        for char in alphabet:
            out = run("search_files", ws, pattern=f"{known}{char}", path="creds.ini")
            if out.content["matches"]:
                known += char
                break
        else:
            break
    assert known == "AKIA"[: len(known)] and len(known) <= 4
    assert not run("search_files", ws, pattern="AKIA", path=".").content["matches"]


@pytest.mark.parametrize(
    "pattern", ["AKIA.{16}", r"key_id = \w", r"= A", "Z3MHQ", r"\[REDACTED", "region", "^k", "D$"]
)
def test_what_a_search_finds_is_what_matching_read_file_s_lines_finds(
    ws: Path, pattern: str
) -> None:
    import re

    lines = run("read_file", ws, path="creds.ini").content["text"].splitlines()
    expected = [n for n, line in enumerate(lines, start=1) if re.search(pattern, line)]
    found = run("search_files", ws, pattern=pattern, path="creds.ini").content["matches"]
    assert [m["line"] for m in found] == expected
    assert [m["text"] for m in found] == [lines[n - 1] for n in expected]


def test_a_deployment_s_pattern_is_no_oracle_either(ws: Path) -> None:
    (ws / "ids.txt").write_text("badge ACME-20261130 issued\n")
    own = Redactor({"acme_badge": r"ACME-[0-9]{8}"})
    assert not run("search_files", ws, redactor=own, pattern="ACME-2", path="ids.txt").content[
        "matches"
    ]
    found = run("search_files", ws, redactor=own, pattern="badge", path="ids.txt").content[
        "matches"
    ]
    assert found[0]["text"] == "badge [REDACTED:acme_badge] issued"


def test_a_private_key_s_body_lines_match_no_pattern(ws: Path) -> None:
    (ws / "id_rsa").write_text("# deploy key\n" + PEM + "done\n")
    for line in BODY:
        assert not run("search_files", ws, pattern=line[10:20], path="id_rsa").content["matches"]
    # line numbers stay those of the file: one marker per line of the block
    done = run("search_files", ws, pattern="^done$", path="id_rsa").content["matches"]
    assert [m["line"] for m in done] == [7]


# --- redacted first, then cut -----------------------------------------------------


def test_a_matched_line_is_redacted_before_it_is_cut(ws: Path) -> None:
    (ws / "long.txt").write_text("x" * 382 + " id=" + KEY + " " + "y" * 300 + "\n")
    out = run("search_files", ws, pattern="x{10}", path="long.txt")
    assert out.content["matches"] and len(out.content["matches"][0]["text"].encode()) <= 400
    assert_hidden(out, KEY, 6)


def test_a_line_longer_than_the_bound_is_redacted_before_it_is_cut(ws: Path) -> None:
    max_bytes = 4096
    room = max_bytes - 1024  # the text's budget (runtime/tools/bounds.py) less a margin
    for at in range(room - 40, room + 600, 7):  # the bound lands somewhere in the key
        (ws / "long.txt").write_text("x" * at + " " + KEY + " " + "y" * 8000 + "\n")
        out = run("read_file", ws, max_bytes, path="long.txt")
        assert_hidden(out, KEY, 6)


def test_a_page_of_lines_is_redacted_before_it_is_cut(ws: Path) -> None:
    lines = [f"line {i} " + "z" * 60 for i in range(200)]
    lines[40] = f"aws_access_key_id={KEY}"
    (ws / "many.txt").write_text("\n".join(lines) + "\n")
    for max_bytes in range(2800, 3600, 13):
        assert_hidden(run("read_file", ws, max_bytes, path="many.txt"), KEY, 6)


# --- a window is redacted with the lines around it ----------------------------


@pytest.mark.parametrize("offset,limit", [(2, None), (3, None), (4, 1), (3, 2), (2, 1), (1, 3)])
def test_a_window_inside_a_private_key_shows_no_line_of_it(
    ws: Path, offset: int, limit: int | None
) -> None:
    (ws / "id_rsa").write_text("# deploy key\n" + PEM + "done\n")
    out = run("read_file", ws, path="id_rsa", offset=offset, limit=limit)
    for line in BODY:
        assert_hidden(out, line, 12)
    text = out.content["text"]
    assert text.count("\n") == out.content["end_line"] - out.content["start_line"] + 1
    assert all(
        line.startswith(("[REDACTED:private_key]", "# deploy", "done"))
        for line in text.splitlines()
    )


YAML = """\
db:
  user: app
  password:
    Vq7rT2mW9xLk4pZs
  replica: 2
tls:
  private_key: |
    MIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAwggE8AgEAAkEAq7BFUpkGp3
    Z2xq5bzGYv8aSx7h0d3PYrFEqjN8ZaNeO5KQaV3mT0Ylq6x9D8sWcR2pU4
  token: >-
    tkn4Hw8Rq2Zp7XcVb5Nm
    3LkJ9sQe6TgYu1OiPa0D
  level: 3
"""
YAML_SECRETS = [
    "Vq7rT2mW9xLk4pZs",
    "MIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAwggE8AgEAAkEAq7BFUpkGp3",
    "Z2xq5bzGYv8aSx7h0d3PYrFEqjN8ZaNeO5KQaV3mT0Ylq6x9D8sWcR2pU4",
    "tkn4Hw8Rq2Zp7XcVb5Nm",
    "3LkJ9sQe6TgYu1OiPa0D",
]


@pytest.mark.parametrize("offset", range(1, 14))
def test_a_window_inside_a_multi_line_yaml_value_shows_none_of_it(ws: Path, offset: int) -> None:
    (ws / "values.yaml").write_text(YAML)
    for limit in (None, 1, 2):
        out = run("read_file", ws, path="values.yaml", offset=offset, limit=limit)
        for secret in YAML_SECRETS:
            assert_hidden(out, secret, 8)
    whole = run("read_file", ws, path="values.yaml").content["text"]
    for kept in ("  user: app", "  replica: 2", "  level: 3", "tls:"):
        assert kept + "\n" in whole


# --- toolrun's own home -------------------------------------------------------


@pytest.mark.parametrize(
    "tool,args",
    [
        ("read_file", {"path": ".toolrun/stack.json"}),
        ("read_file", {"path": "./.TOOLRUN/stack.json"}),
        ("read_file", {"path": "state/stack.json"}),  # state -> .toolrun
        ("list_dir", {"path": ".toolrun"}),
        ("list_dir", {"path": ".toolrun/logs"}),
        ("search_files", {"pattern": "redis", "path": ".toolrun/stack.json"}),
        ("search_files", {"pattern": "redis", "path": ".toolrun"}),
    ],
)
def test_no_read_tool_reads_toolrun_s_home(ws: Path, tool: str, args: dict) -> None:
    home = ws / ".toolrun"
    (home / "logs").mkdir(parents=True)
    (home / "stack.json").write_text('{"redis_url": "redis://:s3cretRedisPw@127.0.0.1:6390/0"}\n')
    (ws / "state").symlink_to(home, target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace, match="toolrun's own"):
        run(tool, ws, **args)


def test_a_home_of_another_name_in_the_workspace_is_not_read(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = ws / "var" / "toolrun-state"
    home.mkdir(parents=True)
    (home / "stack.json").write_text('{"redis_url": "redis://:s3cretRedisPw@127.0.0.1:6390/0"}\n')
    monkeypatch.setenv("TOOLRUN_HOME", str(home))
    with pytest.raises(PathOutsideWorkspace, match="toolrun's own"):
        run("read_file", ws, path="var/toolrun-state/stack.json")
    out = run("search_files", ws, pattern="redis", path=".")
    assert out.content["matches"] == [] and "s3cretRedisPw" not in shown(out)
    names = [e["name"] for e in run("list_dir", ws, path="var").content["entries"]]
    assert names == ["toolrun-state"]  # listed as there, never entered


# --- edit_file matches what read_file shows, too ------------------------------


def test_edit_file_cannot_match_into_a_secret(ws: Path) -> None:
    """Replacing a guess by itself changes nothing, so without this each guess of
    `key_id = AKIA..` would say, by being found or not, whether it was right."""
    from runtime.errors import ToolError

    before = (ws / "creds.ini").read_text()
    for guess in ("key_id = AKIA", KEY[:10], KEY, "AKIA"):
        with pytest.raises(ToolError, match="not found"):
            run("edit_file", ws, path="creds.ini", old_string=guess, new_string=guess + "x")
    with pytest.raises(ToolError, match="marker"):
        run(
            "edit_file",
            ws,
            path="creds.ini",
            old_string="key_id = [REDACTED:aws_access_key]",
            new_string="key_id = x",
        )
    assert (ws / "creds.ini").read_text() == before
    out = run("edit_file", ws, path="creds.ini", old_string="eu-west-1", new_string="eu-north-1")
    assert out.content["replacements"] == 1
    assert (ws / "creds.ini").read_text() == before.replace("eu-west-1", "eu-north-1")


def test_edit_file_counts_and_replaces_only_what_is_shown(ws: Path) -> None:
    assert "2" in KEY
    (ws / "two.env").write_text(f"A=2\nAWS_KEY_ID={KEY}\nB=2\n")
    out = run("edit_file", ws, path="two.env", old_string="2", new_string="3", replace_all=True)
    assert out.content["replacements"] == 2
    assert (ws / "two.env").read_text() == f"A=3\nAWS_KEY_ID={KEY}\nB=3\n"


# --- the corpus: no piece of any secret is found by a search ------------------

CORPUS = Path(__file__).resolve().parents[1] / "data" / "secrets"
MANIFEST: dict[str, list[list[str]]] = json.loads((CORPUS / "manifest.json").read_text())


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_no_piece_of_a_corpus_secret_is_found_by_a_search(tmp_path: Path, name: str) -> None:
    """The oracle on every corpus file: each 8-character piece of each secret, as
    a literal pattern, matches only where read_file shows that piece too."""
    import re

    (tmp_path / name).write_text((CORPUS / name).read_text())
    shows = run("read_file", tmp_path, 1 << 20, path=name).content["text"]
    for _, secret in MANIFEST[name]:
        for piece in {secret[i : i + 8] for i in range(0, max(1, len(secret) - 7), 3)}:
            found = run("search_files", tmp_path, 1 << 20, pattern=re.escape(piece), path=name)
            assert bool(found.content["matches"]) == (piece in shows), (name, piece)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_read_file_shows_no_piece_of_a_corpus_secret(tmp_path: Path, name: str) -> None:
    """Each corpus file where it lives (`.pgpass`, `config/master.key`: some kinds
    are known by the file's name), read whole: no 12 characters of a secret."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / name).write_text((CORPUS / name).read_text())
    out = run("read_file", tmp_path, 1 << 20, path=f"config/{name}")
    for _, secret in MANIFEST[name]:
        assert_hidden(out, secret, 12)


# --- a diff shows no more than read_file (issue 40) ----------------------------

YAML_OLD = "db:\n  host: db.internal\n  password:\n    Zq8vN3xLp0Rt7YwK2mBs\n"
YAML_NEW = "db:\n  host: db2.internal\n  password:\n    Hx4tR9wQm2Lk7VbN5pZs\n"


def test_write_and_edit_file_diffs_hide_a_yaml_value_below_its_name(ws: Path) -> None:
    (ws / "config.yaml").write_text(YAML_OLD)
    assert "Zq8vN3xLp0Rt7YwK2mBs" not in shown(run("read_file", ws, path="config.yaml"))
    out = run("write_file", ws, path="config.yaml", content=YAML_NEW)
    assert "-  host: db.internal" in out.content["diff"]
    assert_hidden(out, "Zq8vN3xLp0Rt7YwK2mBs")
    assert_hidden(out, "Hx4tR9wQm2Lk7VbN5pZs")
    out = run("edit_file", ws, path="config.yaml", old_string="db2", new_string="db3")
    assert "+  host: db3.internal" in out.content["diff"]
    assert_hidden(out, "Hx4tR9wQm2Lk7VbN5pZs")


def test_a_diff_of_a_file_kind_hides_what_read_file_hides(ws: Path) -> None:
    (ws / ".pgpass").write_text("db:5432:app:app:Hj4kLm9PqR2s\n")
    out = run("write_file", ws, path=".pgpass", content="db:5432:app:app:Wq7zXc3VbN8m\n")
    assert_hidden(out, "Hj4kLm9PqR2s")
    assert_hidden(out, "Wq7zXc3VbN8m")


def test_git_diff_in_a_shell_hides_a_yaml_value_below_its_name(ws: Path) -> None:
    """The same through `git diff --no-index`, a real git: the shell's output
    is redacted hunk by hunk, each side as the file its header names."""
    (ws / "old.yaml").write_text(YAML_OLD)
    (ws / "new.yaml").write_text(YAML_NEW)
    (ws / ".pgpass").write_text("db:5432:app:app:Hj4kLm9PqR2s\nx:1:y:z:Wq7zXc3VbN8m\n")
    command = "git diff --no-index old.yaml new.yaml; git diff --no-index /dev/null .pgpass"
    out = run("shell", ws, command=command)
    assert "+  host: db2.internal" in out.content["stdout"]
    for secret in ("Zq8vN3xLp0Rt7YwK2mBs", "Hx4tR9wQm2Lk7VbN5pZs", "Hj4kLm9PqR2s", "Wq7zXc3VbN8m"):
        assert_hidden(out, secret)


# --- deny rules bind inside a search (issue 40) --------------------------------

FILES = [".env", "app.txt", "secrets/a.txt", "secrets/deep/b.txt", "sub/.env", "sub/c.txt"]
DENY_SETS = [
    ["read_file(.env)", "search_files(.env)", "search_files(secrets/**)"],
    ["read_file(.env)"],
    ["read_file(secrets/**)"],
    ["search_files(secrets)"],
    ["read_file(*.txt)"],
    ["read_file(sub/*)", "search_files(/**/deep/**)"],
    ["read_file"],
    [],
]


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    base = tmp_path_factory.mktemp("denied")
    root = base / "ws"
    for index, name in enumerate(FILES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"head\nLINE-{index}-{name}\n")
    ledger = Ledger(f"sqlite:///{base / 'ledger.db'}")
    world = {"ws": root, "registry": load_tools(), "settings": Settings(home=base)}

    def call(tool: str, arguments: dict, deny: list[str]):
        raw = message("c", tool, arguments, workspace=root, mode=Mode.bypass, rules={"deny": deny})
        outcome = execute(
            CallMessage.from_wire(raw),
            registry=world["registry"],
            ledger=ledger,
            settings=world["settings"],
            key=SIGNING_KEY,
        )
        return outcome.result

    yield call
    ledger.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    deny=st.sampled_from(DENY_SETS),
    path=st.sampled_from(
        [".", "secrets", "secrets/deep", "sub", ".env", "sub/.env", "secrets/a.txt"]
    ),
    glob=st.sampled_from([None, ".env", "*", "*.txt", "secrets/**", "**/*.txt", "sub/*"]),
    pattern=st.sampled_from(["LINE", "^L", "-", ".", "txt$", "env"]),
)
def test_no_search_shows_a_line_read_file_is_denied(searched, deny, path, glob, pattern):
    """The oracle property with deny rules: whatever the start path, glob and
    pattern, a search shows no line of a file the rules keep from read_file, or
    from a search of that file alone."""
    arguments = {"pattern": pattern, "path": path, **({"glob": glob} if glob else {})}
    shown = searched("search_files", arguments, deny).model_dump_json()
    for index, name in enumerate(FILES):
        alone = {"pattern": "LINE", "path": name}
        if (
            searched("read_file", {"path": name}, deny).status is Status.denied
            or searched("search_files", alone, deny).status is Status.denied
        ):
            assert f"LINE-{index}-" not in shown, (deny, arguments, name)
