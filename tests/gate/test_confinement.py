"""Property: no generated path outside the workspace is ever read or written,
through every file tool, along the worker's whole path (gate and tool)."""

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime.execution.executor import execute
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import CallMessage, Mode, Status
from tests.support.messages import KEY, message

SECRET = "outside-secret-4242"
SEGMENTS = [
    "..",
    ".",
    "inside",
    "sub",
    "link_out",
    "link_file",
    "link_dir",
    "secret.txt",
    "new.txt",
    "",
    "~",
    "%2e%2e",
    "..\\..",
    "outside",
    "\x00",
    " ",
]
PREFIXES = ["", "/", "./", "~/", "//", "{outside}/", "{ws}/", "{ws}/../"]


def snapshot(root: Path) -> dict[str, str]:
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            state[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "d"
    return state


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("confine")
    ws, outside = base / "ws", base / "outside"
    (ws / "inside" / "sub").mkdir(parents=True)
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "dir" / "secret.txt").write_text(SECRET + "\n")
    (ws / "inside" / "a.txt").write_text("inside text\n")
    (ws / "link_out").symlink_to(outside)
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "inside" / "link_dir").symlink_to(outside / "dir")
    ledger = Ledger(f"sqlite:///{base / 'ledger.db'}")
    yield {
        "ws": ws,
        "outside": outside,
        "ledger": ledger,
        "base": base,
        "registry": load_tools(),
        "settings": Settings(home=base),
    }
    ledger.close()


paths = st.builds(
    lambda prefix, parts: prefix + "/".join(parts),
    st.sampled_from(PREFIXES),
    st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=5),
)
TOOLS = {
    "read_file": lambda p: {"path": p},
    "list_dir": lambda p: {"path": p},
    "search_files": lambda p: {"pattern": "secret", "path": p},
    "write_file": lambda p: {"path": p, "content": "overwritten " + SECRET[:3]},
    "edit_file": lambda p: {"path": p, "old_string": "outside", "new_string": "pwned"},
}


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tool=st.sampled_from(sorted(TOOLS)), template=paths)
def test_no_path_escapes_the_workspace(world, tool, template):
    path = template.format(outside=world["outside"], ws=world["ws"])
    before = snapshot(world["outside"])
    raw = message(
        "c",
        tool,
        TOOLS[tool](path),
        workspace=world["ws"],
        mode=Mode.bypass,
        rules={"allow": [tool]},
    )
    outcome = execute(
        CallMessage.from_wire(raw),
        registry=world["registry"],
        ledger=world["ledger"],
        settings=world["settings"],
        key=KEY,
    )
    assert outcome is not None
    result = outcome.result
    event(f"{tool}: {result.status.value}")
    assert SECRET not in result.model_dump_json(), (tool, path, result.status)
    assert snapshot(world["outside"]) == before, (tool, path)
    if result.status is Status.ok and tool in ("write_file", "edit_file"):
        written = Path(result.content["path"])
        target = (world["ws"] / written).resolve()
        assert target.is_relative_to(world["ws"].resolve())
