"""What the shell reader finds in a command line: its simple commands, its
redirects, the sub-commands it nests, and why it cannot be read, if so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.gate.shell.flags import Escape


@dataclass(frozen=True)
class Segment:
    """One simple command: its words as the shell will see them, quotes removed,
    and its flags that escape a rule's glob (`runtime.gate.shell.flags`)."""

    words: list[str]
    escapes: tuple[Escape, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True)
class Analysis:
    """What a command line runs. `opaque` says why it cannot be read reliably
    (None when it can); `subcommands` are the texts of `$(...)`, backticks and
    the like; `directories` are the `cd`/`pushd` targets, in order."""

    command: str
    workspace: Path
    segments: list[Segment] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)
    opaque: str | None = None
    subcommands: list[str] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
