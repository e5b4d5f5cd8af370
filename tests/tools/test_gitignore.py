"""`.gitignore` files as git reads them: root and nested, anchored and
unanchored, directory-only, negated; a directory named explicitly is searched."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.tools.gitignore import IgnoreRules


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def rules_for(root: Path, start: Path | None = None) -> IgnoreRules:
    """The rules as a walk from `start` meets them (every directory entered)."""
    start = start or root
    rules = IgnoreRules(root, start)
    for folder in sorted(p for p in [start, *start.rglob("*")] if p.is_dir()):
        rules.enter(folder)
    return rules


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return tree(
        tmp_path,
        {
            ".gitignore": ".venv/\n*.log\n!keep.log\n/top.txt\nbuild\n# a comment\n\n",
            "src/.gitignore": "generated/\n*.tmp\n!wanted.tmp\n",
            "src/app.py": "",
            "src/a.tmp": "",
            "src/wanted.tmp": "",
            "src/generated/x.py": "",
            "src/top.txt": "",
            "src/debug.log": "",
            "keep.log": "",
            "top.txt": "",
            ".venv/lib/site.py": "",
            "lib/build": "",
            "other/a.tmp": "",
        },
    )


@pytest.mark.parametrize(
    ("name", "is_dir", "ignored"),
    [
        (".venv", True, True),
        ("src/.venv", True, True),  # unanchored: at any depth
        (".venv", False, False),  # `.venv/` is a directory pattern
        ("src/debug.log", False, True),
        ("keep.log", False, False),  # negated
        ("top.txt", False, True),
        ("src/top.txt", False, False),  # `/top.txt` is anchored to its .gitignore's folder
        ("lib/build", False, True),
        ("src/generated", True, True),  # the nested file's rule
        ("src/a.tmp", False, True),
        ("src/wanted.tmp", False, False),  # the deeper file's negation decides
        ("other/a.tmp", False, False),  # src/.gitignore rules only src/
        ("src/app.py", False, False),
    ],
)
def test_rules_ignore_as_git_does(checkout: Path, name: str, is_dir: bool, ignored: bool):
    assert rules_for(checkout).ignored(checkout / name, is_dir=is_dir) is ignored


def test_a_start_below_the_root_keeps_the_rules_above_it(checkout: Path):
    rules = rules_for(checkout, checkout / "src")
    assert rules.ignored(checkout / "src" / "debug.log", is_dir=False)
    assert rules.ignored(checkout / "src" / "a.tmp", is_dir=False)


def test_an_ignored_directory_named_as_the_start_is_searched(checkout: Path):
    venv = checkout / ".venv"
    rules = rules_for(checkout, venv)
    assert not rules.ignored(venv / "lib", is_dir=True)
    assert not rules.ignored(venv / "lib" / "site.py", is_dir=False)


def test_without_gitignore_files_nothing_is_ignored(tmp_path: Path):
    tree(tmp_path, {"a/b.log": ""})
    assert not rules_for(tmp_path).ignored(tmp_path / "a" / "b.log", is_dir=False)
