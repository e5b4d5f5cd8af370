"""docs/reference/cli.md: every `toolrun` command with its usage, its help text
and its arguments and options, read from the command itself (Typer's click
command tree), so a new command or option shows up without editing a page.

Typer carries its own copy of click (`typer._click`), so commands and
parameters are told apart by what they have (`commands`, `param_type_name`),
not by click's classes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main

Command = Any  # a click command of Typer's copy of click

INTRO = """\
# Command line

`toolrun` is installed with the package (`make` puts it in `.venv/bin`). This
page is generated from the command's own help when the site is built; `toolrun
COMMAND --help` prints the same. Bad input (a missing file, malformed JSON, an
unknown mode) is one line on stderr and exit code 2, never a traceback.

"""


def command() -> Command:
    from runtime.cli import app  # registers every command module

    return typer.main.get_command(app)


def commands(root: Command | None = None) -> Iterator[tuple[str, Command]]:
    """Each command as its full name (`toolrun keys create`), groups included, in order."""
    root = root or command()

    def walk(cmd: Command, path: str) -> Iterator[tuple[str, Command]]:
        yield path, cmd
        if is_group(cmd):
            for name, sub in cmd.commands.items():
                if not sub.hidden:
                    yield from walk(sub, f"{path} {name}")

    return walk(root, "toolrun")


def is_group(cmd: Command) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def is_argument(param: Any) -> bool:
    return param.param_type_name == "argument"


def usage(path: str, cmd: Command) -> str:
    parts = [path]
    if any(not is_argument(p) for p in cmd.params):
        parts.append("[OPTIONS]")
    for param in cmd.params:
        if is_argument(param):
            name = (param.metavar or param.name or "").upper()
            name += "..." if param.nargs == -1 else ""
            parts.append(name if param.required else f"[{name}]")
    if is_group(cmd):
        parts.append("COMMAND")
    return " ".join(parts)


def plain(text: str) -> str:
    """Help text as markdown that means what it says: `[--flag X]` is not a link
    and `<id>` is not a tag."""
    return text.replace("[", "\\[").replace("]", "\\]").replace("<", "&lt;")


def cell(text: str) -> str:
    return plain(" ".join(text.split())).replace("|", "\\|")


def parameter(param: Any) -> str:
    if is_argument(param):
        name = f"`{(param.name or '').upper()}`"
        what = getattr(param, "help", None) or ""
    else:
        name = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        what = param.help or ""
        if param.default not in (None, False, ()) and param.show_default is not False:
            default = param.default
            if isinstance(default, list | tuple):
                default = ", ".join(map(str, default))
            what += f" (default: `{default}`)"
    required = "yes" if param.required else ""
    return f"| {name} | {required} | {cell(what)} |"


def section(path: str, cmd: Command) -> str:
    depth = path.count(" ")
    heading = "#" * min(depth + 1, 4)
    lines = [f"{heading} `{path}`", "", "```text", usage(path, cmd), "```", ""]
    if cmd.help:
        lines += [_help(cmd.help), ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument or option | required | what |", "|---|---|---|"]
        lines += [parameter(p) for p in params]
        lines.append("")
    if is_group(cmd):
        lines.append("Commands: " + ", ".join(f"`{name}`" for name in cmd.commands) + ".")
        lines.append("")
    return "\n".join(lines)


def _help(text: str) -> str:
    """Click's help as markdown: a paragraph click keeps as written (its first
    line is `\\b`) and a synopsis of `toolrun` lines become code blocks, the
    others text."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            paragraphs.append("```text\n" + "\n".join(lines[1:]) + "\n```")
        elif all(line.strip().startswith("toolrun ") for line in lines):  # a synopsis
            paragraphs.append("```text\n" + "\n".join(line.strip() for line in lines) + "\n```")
        else:
            paragraphs.append(plain(paragraph.strip()))
    return "\n\n".join(paragraphs)


def page() -> str:
    found = list(commands())
    return INTRO + "\n".join(section(path, cmd) for path, cmd in found[1:]) + "\n"
