"""The host files an MCP stdio server needs in the sandbox (`runtime/sandbox/programs.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

from runtime.sandbox.programs import needed, places


def test_a_venv_interpreter_brings_its_venv_and_base_and_the_script_itself(tmp_path):
    script = tmp_path / "server.py"
    script.write_text("")
    found = needed([sys.executable, str(script), "--flag"])
    prefix = Path(sys.prefix)
    assert any(prefix == p or prefix.is_relative_to(p) for p in found), found
    assert script in found and tmp_path not in found  # not the folder: it may be a home


def test_an_npm_package_brings_its_node_modules_tree(tmp_path):
    binary = tmp_path / "pkg" / "node_modules" / ".bin" / "server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/usr/bin/env node\n")
    assert tmp_path / "pkg" in needed([str(binary)])


def test_nested_paths_are_mounted_once(tmp_path):
    (tmp_path / "a").write_text("")
    found = needed(["/usr/bin/env", str(tmp_path / "a")])
    assert len(found) == len(set(found))
    assert not any(p != q and p.is_relative_to(q) for p in found for q in found)


def test_a_directory_an_argument_names_is_a_place_not_a_mount(tmp_path):
    (tmp_path / "f").write_text("")
    argv = ["/usr/bin/env", str(tmp_path), str(tmp_path / "f"), "relative"]
    assert places(argv) == [tmp_path]
    assert tmp_path not in needed(argv)
