"""`toolrun`: start the embedded stack, run batches, answer approvals, read the ledger.

Bad input (a missing file, malformed JSON, an unknown mode) is one clear line
on stderr and exit code 2; never a traceback. The commands live in modules by
subject (`batches`, `stack`, `approvals`); this one holds what they share.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from runtime.errors import ToolrunError
from runtime.results import display
from runtime.settings import get_settings, validation_text
from runtime.types import Mode


class _App(typer.Typer):
    """A Typer app that ends every `ToolrunError` as one line on stderr.

    The handling sits on the app itself, not only in `main`, because an
    installed `toolrun` script may call either of them.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The workers `toolrun up` starts import TOOLRUN_TOOL_MODULES from the current
        # directory (as `celery -A` does); the client must find the same modules. Last
        # on the path, so a file here never shadows an installed module.
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        try:
            return super().__call__(*args, **kwargs)
        except ToolrunError as error:
            display.console(stderr=True).print(f"toolrun: {one_line(error)}", markup=False)
            sys.exit(2)
        except (RecursionError, MemoryError, UnicodeError, ValueError) as error:
            # Input no check above foresaw: still one line, never a traceback.
            said = f"{type(error).__name__}: {one_line(error)}"[:300]
            display.console(stderr=True).print(
                f"toolrun: cannot use this input: {said}", markup=False
            )
            sys.exit(2)


app = _App(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help=__doc__.splitlines()[0],
)
out = display.console()


def _print_version(given: bool) -> None:
    if given:
        from importlib.metadata import version

        typer.echo(f"toolrun {version('tool-runtime')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    pass


def fail(message: str, code: int = 2) -> None:
    display.console(stderr=True).print(f"toolrun: {message}", markup=False)
    raise typer.Exit(code)


def check_mode(value: str) -> str:
    if not isinstance(value, str) or value not in Mode.__members__:
        fail(f"unknown mode {value!r}; use one of {', '.join(Mode.__members__)}")
    return value


def choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        fail(f"unknown {option} {value!r}; use one of {', '.join(choices)}")
    return value


def runtime_for(settings=None, *, answering: bool = True):
    """A client of the deployment, once it answers: a dead or mistyped one is one
    line within seconds (docs/architecture.md, "Failing fast"), not a batch's wait.
    `answering=False`: for a command whose work is the ledger's (an approval
    stands while Redis is away)."""
    from runtime.client import Runtime
    from runtime.transport.reachability import require_reachable

    settings = settings or get_settings()
    if answering:
        require_reachable(settings)
    return Runtime(settings)


def one_line(error: BaseException) -> str:
    """The error as one line; a pydantic cause (invalid settings) as its field messages."""
    text = str(error)
    if isinstance(error.__cause__, ValidationError):
        text = text.replace(str(error.__cause__), validation_text(error.__cause__))
    return " ".join(text.split())
