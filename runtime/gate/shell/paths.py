"""Where the words of a shell command lead: the directories it may run in after
`cd`, whether its redirects stay in the workspace, and whether it names a toolrun
settings location. Paths are spelt as bash would expand them (braces, `~`, globs
against what exists) and followed through symlinks; nothing is executed.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from runtime.errors import PathOutsideWorkspace
from runtime.gate.protected import protected_file, protected_locations, refuse_settings_path
from runtime.gate.shell.analysis import Analysis
from runtime.gate.shell.flags import STDIN_RUNNERS  # the words of a whole pipeline count
from runtime.gate.shell.lexer import command_words
from runtime.workspace import resolve_inside

# Commands that never write the files they name (their redirects are checked apart).
READ_ONLY = {"cat", "ls", "head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "stat", "file"}
READ_ONLY |= {"diff", "cmp", "md5sum", "sha1sum", "sha256sum", "realpath", "readlink", "test"}
READ_ONLY |= {"[", "echo", "du", "basename", "dirname"}
# Commands that change a whole tree: naming an ancestor of a settings file counts.
TREE_WRITERS = {"rm", "rmdir", "mv", "cp", "chmod", "chown", "chgrp", "chattr", "setfacl"}
TREE_WRITERS |= {"shred", "unlink", "rsync", "ln", "install"}
FIND_ACTIONS = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls"}
UNKNOWABLE = re.compile(r"[$`]|[<>]\(")
GLOB = re.compile(r"[*?[]")
PROJECT_NAME = ".toolrun"
MAX_CWDS = 16


def touches(analysis: Analysis, root: Path, places: Places) -> str | None:
    """Why this one command (not its sub-commands) could change a settings file, or None."""
    cwds = working_dirs(analysis, root)
    places.lost = cwds is None  # a cd that cannot be followed: settings file names count
    cwds = cwds or [root]
    for target in analysis.redirects:
        if places.names(target, cwds, tree=False):
            return f"it redirects to {target!r}, a toolrun settings location"
    piped = any(os.path.basename(seg.words[0]) in STDIN_RUNNERS for seg in analysis.segments)
    for segment in analysis.segments:
        words = segment.words
        name = os.path.basename(words[0])
        if name in READ_ONLY and not piped:
            continue
        whole = (
            piped or name in TREE_WRITERS or (name == "find" and bool(FIND_ACTIONS & set(words)))
        )
        bare = not re.search(r"[/=]", words[0])  # a bare command name is looked up in PATH
        for word in words[1:] if bare else words:
            pieces = [word, word.split("=", 1)[1]] if "=" in word else [word]
            if any(places.names(piece, cwds, tree=whole) for piece in pieces):
                return f"{segment.text!r} names {word!r}, a toolrun settings location"
    return None


def working_dirs(analysis: Analysis, root: Path) -> list[Path] | None:
    """Every directory a segment may run in (cd may fail, so earlier ones stay);
    None when a cd target cannot be known before running."""
    for segment in analysis.segments:
        rest = command_words(segment.words)
        if rest and (unknowable(rest[0]) or rest[0] in {"eval", "source", ".", "alias", "trap"}):
            return None  # a cd could hide here
    cwds = [root]
    for target in analysis.directories:
        if unknowable(target):
            return None
        found = []
        for cwd in cwds:
            for path in _spellings(target, cwd):
                found += [Path(os.path.normpath(path)), _resolve(path)]
        cwds = list(dict.fromkeys(cwds + [path for path in found if path is not None]))
        if len(cwds) > MAX_CWDS:
            return None  # too many places to follow
    return cwds


def unknowable(word: str) -> bool:
    """True when where `word` leads is only known when it runs: an expansion,
    or a `~` form other than a plain home directory (`~+`, `~-`, `~nobody`)."""
    if UNKNOWABLE.search(word):
        return True
    return word.startswith("~") and os.path.expanduser(word).startswith("~")


def redirect_inside(target: str, cwds: list[Path], root: Path) -> bool:
    """Does a redirect to `target` stay in the workspace and off settings, from every cwd?"""
    for cwd in cwds:
        for path in _spellings(target, cwd):
            try:
                resolved = resolve_inside(root, str(path))
                refuse_settings_path(root, str(path), resolved)
            except PathOutsideWorkspace:
                return False
    return True


def guarded_target(target: str, cwds: list[Path], root: Path) -> str | None:
    """Why writing `target` from one of `cwds` changes git's configuration or hooks
    or a shell's rc file (`runtime.gate.protected.protected_file`), or None."""
    for cwd in cwds:
        for path in _spellings(target, cwd):
            try:
                resolved = resolve_inside(root, str(path))
            except PathOutsideWorkspace:
                continue  # outside: refused as such by the caller's other checks
            reason = protected_file(root, str(path), resolved)
            if reason:
                return reason
    return None


def _spellings(word: str, cwd: Path) -> list[Path]:
    """`word` as paths from `cwd`: braces expanded, `~` expanded, globs matched
    against what exists (a glob that matches nothing is taken literally)."""
    paths = []
    for spelt in _braces(word):
        spelt = os.path.expanduser(spelt)
        magic = GLOB.search(spelt)
        matched = glob.glob(spelt, root_dir=cwd, include_hidden=True) if magic else []
        paths += [cwd / name for name in [*matched[:64], spelt]]
    return paths


def _braces(word: str, limit: int = 64) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", word)
    if not match or limit <= 1:
        return [word]
    body = match.group(1)
    span = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])", body)
    if span:
        low, high = span.groups()
        numeric = low.lstrip("-").isdigit()
        first, last = (int(low), int(high)) if numeric else (ord(low), ord(high))
        step = 1 if last >= first else -1
        items = [str(n) if numeric else chr(n) for n in range(first, last + step, step)]
    elif "," in body:
        items = body.split(",")
    else:
        head = word[: match.end()]
        return [head + rest for rest in _braces(word[match.end() :], limit)]
    expanded = []
    for item in items[:limit]:
        expanded += _braces(word[: match.start()] + item + word[match.end() :], limit // 2)
    return expanded[:limit]


def _resolve(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (RuntimeError, OSError, ValueError):  # a loop, no access, or a NUL byte
        return None


class Places:
    """The settings locations, their files' identities, and the tests on a word."""

    def __init__(self, root: Path) -> None:
        self.lost = False
        self.known: dict[tuple, bool] = {}
        self.locations = protected_locations(root)
        extra = os.environ.get("TOOLRUN_USER_SETTINGS_FILE")
        if extra and _resolve(Path(extra).expanduser()) is None:
            self.locations.append(Path(extra))  # protected_locations skips it: keep it as spelt
        self.file_names = {"settings.json"} | {loc.name.lower() for loc in self.locations}
        files = [loc / "settings.json" for loc in self.locations] + self.locations
        self.inodes = set()
        for path in files:
            try:
                info = path.stat()
            except OSError:
                continue
            if not path.is_dir():
                self.inodes.add((info.st_dev, info.st_ino))

    def names(self, word: str, cwds: list[Path], *, tree: bool) -> bool:
        """Does `word` name a settings location (or, for `tree`, a directory
        holding one) from any of `cwds`?"""
        if PROJECT_NAME in word.lower():
            return True
        if self.lost and os.path.basename(word.rstrip("/")).lower() in self.file_names:
            return True
        key = (word, tuple(cwds), tree)
        if key not in self.known:
            self.known[key] = self._leads_to(word, cwds, tree=tree)
        return self.known[key]

    def _leads_to(self, word: str, cwds: list[Path], *, tree: bool) -> bool:
        for cwd in cwds:
            for path in _spellings(word, cwd):
                resolved = _resolve(path)
                if resolved is None:
                    return True
                for candidate in (Path(os.path.normpath(path)), resolved):
                    if PROJECT_NAME in (part.lower() for part in candidate.parts):
                        return True
                    for location in self.locations:
                        if candidate.is_relative_to(location):
                            return True
                        if tree and location.is_relative_to(candidate):
                            return True
                try:
                    info = resolved.stat()
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in self.inodes:
                    return True
        return False
