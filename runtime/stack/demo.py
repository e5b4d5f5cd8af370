"""The sample batch `toolrun demo` runs: reads, a write, a read of what was
written, and one of each early end (unknown tool, invalid call, refused by mode)."""

from __future__ import annotations

import json
from pathlib import Path

FILES = {
    "README.md": "# demo project\n\nA tiny workspace for the toolrun demo.\n",
    "src/app.py": "def main():\n    # TODO: greet the user\n    print('hello')\n",
    "config.env": "DATABASE_URL=postgres://app:hunter2@db:5432/app\n",
    ".toolrun/cache/thumbnails/a.png": "not really a png\n",
}

CALLS = [
    {"id": "call_1", "name": "read_file", "arguments": {"path": "README.md"}},
    {"id": "call_2", "name": "list_dir", "arguments": {"path": "."}},
    {"id": "call_3", "name": "search_files", "arguments": {"pattern": "TODO"}},
    {"id": "call_4", "name": "read_file", "arguments": {"path": "config.env"}},
    {
        "id": "call_5",
        "name": "write_file",
        "arguments": {"path": "NOTES.md", "content": "# notes\n\n- greet the user\n"},
    },
    {"id": "call_6", "name": "read_file", "arguments": {"path": "NOTES.md"}},
    {"id": "call_7", "name": "read_file", "arguments": {"path": None}},
    {"id": "call_8", "name": "delete_cache", "arguments": {"scope": "thumbnails"}},
    {"id": "call_9", "name": "reed_file", "arguments": {"path": "README.md"}},
]


# Auto mode runs a side effect only where a rule allows it; delete_cache has
# none, so auto mode refuses it.
RULES = {"allow": ["write_file(*.md)"]}


def trust_file(home: Path, workspace: Path) -> Path:
    """A user settings file trusting only the demo workspace (the user's own
    settings file is left alone)."""
    path = home / "demo-user-settings.json"
    path.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    return path


def prepare_workspace(root: Path) -> Path:
    """A fresh copy of the demo files (NOTES.md is removed so the write creates it)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "NOTES.md").unlink(missing_ok=True)
    return root.resolve()
