"""Flags that escape a rule's glob: options that run a program of the caller's choosing
or name a file outside the workspace (docs/architecture.md, "The permission gate").

`shell(git diff *)` is written to allow looking at changes; `git diff --output=/x`,
`git -c core.fsmonitor=cmd diff` and `find . -exec cmd ;` match its words but do
something else. The table names such flags per program; a word that is one (with
its value, when the value is the next word) is *marked*, and a rule's `*` never
matches a marked word: only a rule that spells the flag out covers it. A flag
that names a file is marked only when that file leads outside the workspace, into
a settings location or git's configuration, or cannot be known before running.

An unquoted glob or brace word that bash could expand to a name starting with `-`
(`*` next to a workspace file named `--output=x`) is marked too, for every program
in the table: which flags it becomes is only known when it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

RUNS = "runs"  # always an escape: it runs a program, or reads options that may name any flag
PATH = "path"  # an escape when its file leads astray
HARMLESS = ""  # read only so that its value is not taken for git's subcommand
NONE, JOINED, NEXT = 0, 1, 2  # the flag takes no value, a value only after `=`, or the next word
MOVES = {"-C", "--directory"}  # flags after which a relative file is relative to their directory


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    kind: str
    value: int
    why: str


@dataclass(frozen=True)
class Escape:
    """Words (indices into a segment) that together are one escaping flag, and why;
    no indices: the segment's flags are unknown, and no rule covers it."""

    indices: tuple[int, ...]
    reason: str


def _flags(kind: str, value: int, why: str, *names: str) -> Flag:
    return Flag(names, kind, value, why)


CONFIG = "sets git configuration, which can name a program to run (core.fsmonitor, diff.external)"
WRITES = "writes or reads the file it names"
PROGRAM = "runs the program it names"
# git's options before its subcommand, then those of every subcommand, then per subcommand.
GIT_GLOBAL = [
    _flags(RUNS, NEXT, CONFIG, "-c", "--config-env"),
    _flags(RUNS, JOINED, "runs git's programs from the directory it names", "--exec-path"),
    _flags(PATH, NEXT, "makes git work on the repository or tree it names", "-C", "--git-dir"),
    _flags(PATH, NEXT, "makes git work on the repository or tree it names", "--work-tree"),
    _flags(HARMLESS, NEXT, "", "--namespace", "--super-prefix", "--attr-source"),
]
GIT_ANY = [
    _flags(PATH, NEXT, WRITES, "--output", "--output-directory", "-o", "--file", "--reference"),
    _flags(PATH, NEXT, WRITES, "--separate-git-dir", "--git-dir", "--work-tree"),
    _flags(RUNS, NEXT, PROGRAM, "--upload-pack", "--receive-pack", "--exec"),
    _flags(RUNS, NONE, "runs the program git's configuration names", "--ext-diff", "--textconv"),
    _flags(RUNS, NEXT, CONFIG, "--config", "--template"),
    _flags(RUNS, JOINED, "opens the matches in the program it names", "--open-files-in-pager"),
    # Subcommands (words, not flags), matched where git reads its subcommand.
    _flags(RUNS, NONE, "changes git's configuration, which can name a program to run", "config"),
    _flags(RUNS, NONE, "runs the commands it is given", "filter-branch"),
]
GIT_SUBCOMMAND = {
    "clone": [_flags(RUNS, NEXT, PROGRAM, "-u")],
    "rebase": [_flags(RUNS, NEXT, PROGRAM, "-x", "--exec")],
    "difftool": [_flags(RUNS, NEXT, PROGRAM, "-x", "--extcmd", "-t", "--tool")],
    "mergetool": [_flags(RUNS, NEXT, PROGRAM, "-t", "--tool")],
    "grep": [_flags(RUNS, JOINED, "opens the matches in the program it names", "-O")],
    "submodule": [_flags(RUNS, NONE, "runs a command in every submodule", "foreach")],
    "bisect": [_flags(RUNS, NONE, "runs the command it is given", "run")],
    "send-email": [_flags(RUNS, NEXT, PROGRAM, "--sendmail-cmd", "--smtp-server")],
}
# Other programs; `clusters` says whether `-xzf` is three short options.
OTHERS: dict[str, tuple[bool, list[Flag]]] = {
    "find": (
        False,
        [
            _flags(RUNS, NONE, PROGRAM, "-exec", "-execdir", "-ok", "-okdir"),
            _flags(PATH, NEXT, WRITES, "-fprint", "-fprint0", "-fprintf", "-fls"),
        ],
    ),
    "tar": (
        True,
        [
            _flags(PATH, NEXT, WRITES, "-f", "--file", "-C", "--directory", "-T", "--files-from"),
            _flags(RUNS, NEXT, PROGRAM, "--to-command", "-I", "--use-compress-program"),
            _flags(RUNS, NEXT, PROGRAM, "--checkpoint-action", "-F", "--info-script"),
            _flags(RUNS, NEXT, PROGRAM, "--new-volume-script", "--rsh-command"),
        ],
    ),
    "sort": (
        True,
        [
            _flags(PATH, NEXT, WRITES, "-o", "--output", "-T", "--temporary-directory"),
            _flags(RUNS, NEXT, PROGRAM, "--compress-program"),
        ],
    ),
    "rsync": (
        True,
        [
            _flags(RUNS, NEXT, PROGRAM, "-e", "--rsh", "--rsync-path"),
            _flags(PATH, NEXT, WRITES, "--log-file", "--write-batch", "--only-write-batch"),
            _flags(PATH, NEXT, WRITES, "-T", "--temp-dir", "--backup-dir", "--partial-dir"),
        ],
    ),
    "curl": (
        True,
        [
            _flags(RUNS, NEXT, "reads options from a file, which can name any flag", "-K"),
            _flags(RUNS, NEXT, "reads options from a file, which can name any flag", "--config"),
            _flags(PATH, NEXT, WRITES, "-o", "--output", "--output-dir", "-D", "--dump-header"),
            _flags(PATH, NEXT, WRITES, "-c", "--cookie-jar", "--trace", "--trace-ascii"),
            _flags(PATH, NEXT, WRITES, "--stderr", "-T", "--upload-file", "--libcurl"),
        ],
    ),
    "wget": (
        True,
        [
            _flags(RUNS, NEXT, "runs a wgetrc command, which can set any option", "-e"),
            _flags(RUNS, NEXT, "runs a wgetrc command, which can set any option", "--execute"),
            _flags(RUNS, NEXT, "reads options from a file, which can name any flag", "--config"),
            _flags(PATH, NEXT, WRITES, "-O", "--output-document", "-o", "--output-file", "-a"),
            _flags(PATH, NEXT, WRITES, "--append-output", "-P", "--directory-prefix"),
            _flags(PATH, NEXT, WRITES, "-i", "--input-file", "--save-cookies"),
        ],
    ),
    "make": (
        True,
        [
            _flags(PATH, NEXT, "runs the makefile it names", "-f", "--file", "--makefile"),
            _flags(PATH, NEXT, "runs the makefile it names", "-C", "--directory"),
            _flags(PATH, NEXT, "runs the makefile it names", "-I", "--include-dir"),
            _flags(RUNS, NEXT, PROGRAM, "-E", "--eval"),
        ],
    ),
    "ssh": (True, [_flags(RUNS, NEXT, "sets options that run commands", "-o", "-F")]),
    "scp": (True, [_flags(RUNS, NEXT, "sets options that run commands", "-o", "-F", "-S")]),
    "sftp": (True, [_flags(RUNS, NEXT, "sets options that run commands", "-o", "-F", "-S")]),
    "patch": (
        True,
        [_flags(PATH, NEXT, WRITES, "-o", "--output", "-d", "--directory", "-r", "-i", "--input")],
    ),
    "pytest": (
        True,
        [
            _flags(
                RUNS, NEXT, "loads the plugin or setting it names", "-p", "-o", "--override-ini"
            ),
            _flags(PATH, NEXT, WRITES, "-c", "--rootdir", "--basetemp", "--junitxml"),
            _flags(PATH, NEXT, WRITES, "--junit-xml", "--confcutdir"),
        ],
    ),
    "zip": (True, [_flags(RUNS, NEXT, PROGRAM, "-TT", "--unzip-command")]),
    "unzip": (True, [_flags(PATH, NEXT, WRITES, "-d")]),
    "gcc": (
        False,
        [
            _flags(PATH, NEXT, WRITES, "-o"),
            _flags(RUNS, NEXT, PROGRAM, "-B", "-wrapper", "-fplugin", "-specs"),
        ],
    ),
}
for _name in ("cp", "mv", "ln", "install"):
    OTHERS[_name] = (True, [_flags(PATH, NEXT, WRITES, "-t", "--target-directory")])
for _name in ("cc", "g++", "c++", "clang", "clang++"):
    OTHERS[_name] = OTHERS["gcc"]
OTHERS["py.test"] = OTHERS["pytest"]
PROGRAMS = {"git", *OTHERS}
# Commands that take their arguments from stdin: a program they run may get any flag.
STDIN_RUNNERS = {"xargs", "parallel"}

Astray = Callable[[str], "str | None"]  # why a file a flag names leads astray, or None


def escapes(words: list[str], loose: set[int], starts: list[int], astray: Astray) -> list[Escape]:
    """The escaping flags of one segment: `words` as the shell will see them,
    `loose` the indices of words bash may expand into something starting with `-`,
    `starts` the indices where a program begins (the command, and any program a
    wrapper runs), `astray` the test on a flag's file."""
    found: list[Escape] = []
    feeder = os.path.basename(words[starts[0]]) if starts else ""
    if feeder in STDIN_RUNNERS and any(os.path.basename(words[s]) in PROGRAMS for s in starts):
        found.append(
            Escape((), f"{feeder!r} (hands the program words from its input, which may be flags)")
        )
    for start in starts:
        name = os.path.basename(words[start])
        if name in PROGRAMS:
            found += _scan(name, words, start, loose, astray)
    return found


def _scan(name: str, words: list[str], start: int, loose: set[int], astray: Astray) -> list:
    """The escapes of the program `name` whose words begin at `start`; for git,
    `sub` is its subcommand once read, `operands` how many non-flags were read."""
    found, index, sub, operands, bases = [], start + 1, None, 0, [""]
    while index < len(words):
        word = words[index]
        if name == "tar" and index == start + 1 and not word.startswith("-"):
            word = "-" + word  # `tar cf out.tar x`: the first word is short options
        if word == "--":
            break  # what follows is operands, never options
        if index in loose:
            found.append(Escape((index,), _loose_reason(word)))
            index += 1
            continue
        table, clusters = _table(name, sub)
        if not word.startswith("-") or word == "-":
            # A word in the table is a subcommand (`git config`) or its first
            # operand (`git submodule foreach`); elsewhere it is a name like any.
            if name == "git" and operands < 2:
                named = GIT_ANY if operands == 0 else GIT_SUBCOMMAND.get(sub or "", [])
                hit = next((flag for flag in named if word in flag.names), None)
                if hit is not None:
                    found.append(Escape((index,), f"{word!r} ({hit.why})"))
            sub, operands = sub or word, operands + 1
            index += 1
            continue
        flag, value, taken = _match(word, words[index + 1 : index + 2], table, clusters)
        indices = tuple(range(index, index + 1 + taken))
        if taken and index + 1 in loose:
            found.append(Escape((index + 1,), _loose_reason(words[index + 1])))
        if flag is not None and flag.kind == RUNS:
            found.append(Escape(indices, f"{word!r} ({flag.why})"))
        elif flag is not None and flag.kind == PATH and value is not None:
            why = next(filter(None, (astray(os.path.join(base, value)) for base in bases)), None)
            if why:
                found.append(Escape(indices, f"{word!r} ({flag.why}, and {value!r} {why})"))
            if MOVES & set(flag.names):
                bases = [os.path.join(base, value) for base in bases] + bases
        index += 1 + taken
    return found


def _table(name: str, sub: str | None) -> tuple[list[Flag], bool]:
    if name != "git":
        return OTHERS[name][1], OTHERS[name][0]
    if sub is None:  # before the subcommand: its options, and any subcommand's to be safe
        return GIT_GLOBAL + GIT_ANY, True
    return GIT_ANY + GIT_SUBCOMMAND.get(sub, []), True


def _match(
    word: str, following: list[str], table: list[Flag], clusters: bool
) -> tuple[Flag | None, str | None, int]:
    """(the flag `word` is, its value, how many following words it takes)."""
    option, joined = (word.split("=", 1) + [None])[:2] if "=" in word else (word, None)
    for flag in table:
        long = word.startswith("--") or not clusters
        for spelt in flag.names:
            exact = option == spelt
            # GNU getopt and git's parser take any unambiguous prefix of a long option.
            prefix = (
                long and spelt.startswith("--") and len(option) > 2 and spelt.startswith(option)
            )
            if exact or prefix:
                return _valued(flag, joined, following)
            glued = len(spelt) == 2 and word.startswith(spelt) and len(word) > 2
            if glued and not clusters and flag.value == NEXT:
                return flag, word[2:], 0  # -ofile
    if clusters and not word.startswith("--"):
        for at, letter in enumerate(word[1:], start=1):
            flag = next((f for f in table if "-" + letter in f.names), None)
            if flag is not None:
                rest = word[at + 1 :] or None
                return _valued(flag, rest, following)
    return None, None, 0


def _valued(flag: Flag, joined: str | None, following: list[str]) -> tuple[Flag, str | None, int]:
    if joined is not None or flag.value != NEXT:
        return flag, joined, 0
    return flag, (following[0] if following else None), min(len(following), 1)


def _loose_reason(word: str) -> str:
    return (
        f"{word!r} (an unquoted pattern the shell expands to file names, which may start "
        "with '-' and so become any flag, as a file named '--output=x' would; quote it, "
        "or name the files)"
    )
