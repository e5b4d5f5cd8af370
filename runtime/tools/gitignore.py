"""What a checkout's `.gitignore` files leave out of a search, read as git reads
them (pathspec's `GitIgnoreSpec`): each file's patterns are relative to its own
directory, a deeper file's patterns come after a shallower one's (the last
match decides, so `!keep.log` re-includes), and an ignored directory is not
entered at all. A checkout's `.venv` or `node_modules` holds tens of thousands
of files nobody means to search (docs/architecture.md, "Searching a checkout").

Only `.gitignore` files inside the workspace are read: never a parent's, a
global excludes file, or `.git/info/exclude`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

IGNORE_FILE = ".gitignore"
MAX_IGNORE_BYTES = 1024 * 1024  # a larger one is not a list of patterns anyone wrote


class IgnoreRules:
    """The `.gitignore` rules of the directories from `root` down to `start`
    (a directory), and below as `enter` is called for each directory walked into."""

    def __init__(self, root: Path, start: Path) -> None:
        self._specs: dict[Path, GitIgnoreSpec] = {}
        for ancestor in reversed(start.parents):
            if ancestor.is_relative_to(root):
                self.enter(ancestor)
        if self.ignored(start, is_dir=True):
            self._specs.clear()  # named explicitly: searched, as ripgrep does with a path

    def enter(self, folder: Path) -> None:
        """Read `folder`'s own `.gitignore`, if it has a readable one."""
        path = folder / IGNORE_FILE
        try:
            if path.is_symlink() or path.stat().st_size > MAX_IGNORE_BYTES:
                return
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return
        # Here, not at import: every client and worker imports the tools, few search
        # (docs/architecture.md, "Starting fast").
        from pathspec import GitIgnoreSpec

        spec = GitIgnoreSpec.from_lines(lines)
        if spec.patterns:
            self._specs[folder] = spec

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        """Whether the rules of `path`'s ancestors ignore it, the deepest deciding."""
        if not self._specs:
            return False
        verdict = None
        for folder in reversed(path.parents):
            spec = self._specs.get(folder)
            if spec is None:
                continue
            name = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
            found = spec.check_file(name).include
            if found is not None:
                verdict = found
        return bool(verdict)
