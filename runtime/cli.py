"""`toolrun`: start the embedded stack, run batches, read the ledger.

Bad input (a missing file, malformed JSON, an unknown mode) is one clear line
on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.live import Live

from runtime import display
from runtime.errors import ToolrunError
from runtime.settings import get_settings
from runtime.types import Mode, ToolCall


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
            display.console(stderr=True).print(f"toolrun: {_one_line(error)}", markup=False)
            sys.exit(2)


app = _App(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help=__doc__.splitlines()[0],
)
out = display.console()


def fail(message: str, code: int = 2) -> None:
    display.console(stderr=True).print(f"toolrun: {message}", markup=False)
    raise typer.Exit(code)


@app.command()
def up() -> None:
    """Start a private Redis, a reads and an effects worker, and Flower."""
    from runtime import stack

    settings = get_settings()
    record = stack.load_record(settings.home)
    if record is not None:
        out.print(
            f"already up: redis {_address(record.redis_url)}; `toolrun down` stops it",
            markup=False,
        )
        return
    record = stack.start_stack(settings)
    out.print(
        f"redis   {_address(record.redis_url)} (password in {settings.home / stack.RECORD})",
        markup=False,
    )
    for worker in record.workers:
        out.print(
            f"worker  {worker['name']} (queue {worker['queue']}, pid {worker['pid']})",
            markup=False,
        )
    if record.flower:
        out.print(
            f"flower  {record.flower['url']} (user {record.flower['user']}; "
            f"password in {settings.home / stack.RECORD})",
            markup=False,
        )


@app.command()
def down() -> None:
    """Stop exactly the processes `toolrun up` started."""
    from runtime import stack

    stopped = stack.stop_stack(get_settings().home)
    out.print("stopped" if stopped else "nothing was running")


@app.command()
def tools() -> None:
    """List the registry: every tool with its risk."""
    from runtime.registry import load_tools

    for spec in load_tools(get_settings().module_names):
        first = spec.description.splitlines()[0] if spec.description else ""
        flags = "idempotent" if spec.idempotent else ""
        out.print(f"{spec.name:<16} {spec.risk.value:<12} {flags:<11} {first}", markup=False)


@app.command()
def run(
    file: Annotated[
        Path, typer.Argument(help="A JSON batch: a list of calls or {calls, mode, ...}.")
    ],
    mode: Annotated[
        str | None, typer.Option(help="plan, default, accept_edits, auto, bypass.")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Directory the file tools are confined to.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {batch_id, results} as JSON.")
    ] = False,
    timeout: Annotated[float | None, typer.Option(help="Seconds the batch may take.")] = None,
) -> None:
    """Submit a batch and show its results as they finish."""
    batch = _read_batch(file)
    if mode is not None:
        batch["mode"] = _mode(mode)
    if workspace is not None:
        batch["workspace"] = str(workspace)
    handle = _runtime().submit(
        batch["calls"],
        mode=batch.get("mode"),
        workspace=batch.get("workspace"),
        on_error=batch.get("on_error"),
        timeout=timeout,
    )
    results = _follow(handle, quiet=as_json)
    if as_json:
        payload = {
            "batch_id": handle.batch_id,
            "results": [r.model_dump(mode="json") for r in results],
        }
        print(json.dumps(payload, indent=2))


@app.command()
def ledger(
    batch_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Print a batch's ledger rows: decisions and transitions, in order."""
    from runtime.ledger import Ledger

    book = Ledger(get_settings().ledger_url)
    events = book.events(batch_id)
    if not events:
        fail(f"no ledger rows for batch {batch_id!r}")
    if as_json:
        print(json.dumps([row.model_dump(mode="json") for row in events], indent=2, default=str))
    elif out.is_terminal:
        out.print(display.ledger_table(events, f"ledger of batch {batch_id}"))
    else:
        for row in events:
            out.print(display.event_line(row), markup=False)


@app.command()
def demo() -> None:
    """Start the stack, run a sample batch, print its results and ledger, stop."""
    from runtime import demo as sample
    from runtime import stack

    settings = get_settings()
    started = stack.load_record(settings.home) is None
    if started:
        up()
    try:
        workspace = sample.prepare_workspace(settings.home / "demo-workspace")
        out.print(f"\nsample batch in {workspace} (mode auto):", markup=False)
        for call in sample.CALLS:
            out.print(
                f"  {call['id']}: {call['name']}({json.dumps(call['arguments'])})", markup=False
            )
        handle = _runtime().submit(sample.CALLS, mode="auto", workspace=workspace, timeout=60)
        results = _follow(handle, quiet=False)
        out.print(f"\nledger of batch {handle.batch_id}:", markup=False)
        ledger(handle.batch_id, as_json=False)
        missing = [c["id"] for c in sample.CALLS if c["id"] not in {r.call_id for r in results}]
        if missing:
            fail(f"calls without a result: {missing}", code=1)
    finally:
        if started:
            down()


def _follow(handle, *, quiet: bool) -> list:
    """Show results as they finish (a live table on a TTY), return them in order."""
    if quiet:
        return handle.results()
    if out.is_terminal:
        seen = []
        with Live(display.results_table(seen), console=out, refresh_per_second=8) as live:
            for result in handle.stream():
                seen.append(result)
                live.update(display.results_table(seen, f"batch {handle.batch_id}"))
    else:
        out.print(f"batch {handle.batch_id}", markup=False)
        for result in handle.stream():
            out.print(display.result_line(result), markup=False)
    return handle.results()


def _read_batch(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        fail(f"no such batch file: {file}")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read {file}: {error}")
    except json.JSONDecodeError as error:
        fail(f"{file} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}")
    if isinstance(data, list):
        data = {"calls": data}
    if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
        fail(f"{file} must hold a list of calls or an object with a 'calls' list")
    for index, call in enumerate(data["calls"]):
        try:
            ToolCall.model_validate(call)
        except ValidationError as error:
            fail(f"{file}: call {index} is not a tool call: {_errors(error)}")
    if data.get("on_error") not in (None, "stop", "continue"):
        fail(f"{file}: on_error must be 'stop' or 'continue', not {data['on_error']!r}")
    if "mode" in data:
        data["mode"] = _mode(data["mode"])
    return data


def _mode(value: str) -> str:
    if not isinstance(value, str) or value not in Mode.__members__:
        fail(f"unknown mode {value!r}; use one of {', '.join(Mode.__members__)}")
    return value


def _runtime():
    from runtime.client import Runtime

    return Runtime(get_settings())


def _address(redis_url: str) -> str:
    """host:port of a Redis URL: its password stays in the stack record, off the screen."""
    import redis

    address = redis.connection.parse_url(redis_url)
    return f"{address.get('host', '?')}:{address.get('port', '?')}"


def _errors(error: ValidationError) -> str:
    return "; ".join(
        (f"{'.'.join(map(str, item['loc']))}: " if item["loc"] else "")
        + item["msg"].removeprefix("Value error, ")
        for item in error.errors(include_url=False)
    )


def _one_line(error: BaseException) -> str:
    """The error as one line; a pydantic cause (invalid settings) as its field messages."""
    text = str(error)
    if isinstance(error.__cause__, ValidationError):
        text = text.replace(str(error.__cause__), _errors(error.__cause__))
    return " ".join(text.split())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
