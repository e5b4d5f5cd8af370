"""Commands about the deployment: the embedded stack, its status, the ledger schema."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from runtime.cli.common import (
    app,
    fail,
    out,
)
from runtime.cli.gateway import WITHOUT_EXTRA, gateway_installed
from runtime.settings import get_settings


@app.command()
def up() -> None:
    """Start a private Redis, a reads and an effects worker, Flower and the HTTP gateway."""
    from runtime.stack import embedded as stack
    from runtime.transport.reachability import address

    settings = get_settings()
    record = stack.load_record(settings.home)
    if record is not None and stack.is_running(record):
        out.print(
            f"already up: redis {address(record.redis_url)}; `toolrun down` stops it",
            markup=False,
        )
        return
    if record is not None:  # killed, or the machine restarted: its record is all that is left
        out.print(
            f"the stack recorded in {settings.home} is down; starting a new one", markup=False
        )
        stack.stop_stack(settings.home)
    record = stack.start_stack(settings, supervise=True, gateway=gateway_installed())
    out.print(
        f"redis   {address(record.redis_url)} (password in {settings.home / stack.RECORD})",
        markup=False,
    )
    for worker in record.workers:
        out.print(
            f"worker  {worker['name']} (queue {worker['queue']}, pid {worker['pid']})",
            markup=False,
        )
    if record.supervisor_pid:
        out.print(
            f"supervisor pid {record.supervisor_pid}: restarts a worker that dies or stops "
            "answering its ping",
            markup=False,
        )
    if record.flower:
        out.print(
            f"flower  {record.flower['url']} (user {record.flower['user']}; "
            f"password in {settings.home / stack.RECORD})",
            markup=False,
        )
    if record.gateway:
        out.print(
            f"gateway {record.gateway['url']} (keys: `toolrun keys create NAME --role ...`)",
            markup=False,
        )
    else:
        out.print(f"gateway not started: {WITHOUT_EXTRA}", markup=False)


@app.command()
def down() -> None:
    """Stop exactly the processes `toolrun up` started."""
    from runtime.stack import embedded as stack

    stopped = stack.stop_stack(get_settings().home)
    out.print("stopped" if stopped else "nothing was running")


@app.command()
def home() -> None:
    """Print toolrun's home: the stack record (stack.json), ledger and logs of this
    user's stack (TOOLRUN_HOME, else $XDG_STATE_HOME/toolrun or ~/.local/state/toolrun)."""
    print(get_settings().home.resolve())


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for workers to answer.")] = 1.0,
) -> None:
    """Workers (up or down, queues, active calls), queue lengths, pending approvals."""
    from runtime.stack import status as report

    found = report.collect(get_settings(), timeout=timeout)
    if as_json:
        print(json.dumps(found.to_json(), indent=2))
        return
    for line in report.lines(found):
        out.print(line, markup=False)


db = typer.Typer(no_args_is_help=True, help="The ledger's schema: Alembic migrations.")
app.add_typer(db, name="db")


@db.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="The revision to reach.")] = "head",
) -> None:
    """Migrate the ledger (TOOLRUN_DATABASE_URL, else the embedded SQLite)."""
    from runtime.ledger import schema

    reached = schema.upgrade(get_settings().ledger_url, revision)
    out.print(f"ledger schema at revision {reached}", markup=False)


@db.command("check")
def db_check() -> None:
    """Exit 1 if the ledger's schema differs from the models or is not the newest."""
    from runtime.ledger import schema

    url = get_settings().ledger_url
    at, newest = schema.current(url), schema.head()
    found = schema.differences(url)
    for difference in found:
        out.print(f"differs: {difference}", markup=False)
    if at != newest:
        fail(f"ledger schema at revision {at}, newest is {newest}: run `toolrun db upgrade`", 1)
    if found:
        fail("the models differ from the newest revision: `make migration m=...` writes one", 1)
    out.print(f"ledger schema at revision {at}, as the models say", markup=False)


@db.command("revision")
def db_revision(
    message: Annotated[str, typer.Option("-m", "--message", help="What the revision does.")],
) -> None:
    """Write the next revision from how the models differ from the newest one."""
    from runtime.ledger import schema

    path = schema.revision(message)
    out.print(f"wrote {path}" if path else "the models match the newest revision; nothing written")


@app.command()
def metrics(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; 0: a free one.")] = 9464,
) -> None:
    """Serve the cluster's Prometheus figures at /metrics (calls by tool and status,
    run times, calls waiting and running per queue, approvals pending), for a
    deployment without the gateway; the gateway's /metrics has them too."""
    from prometheus_client import start_http_server

    from runtime.cli.common import runtime_for
    from runtime.gateway.metrics import cluster_registry

    runtime = runtime_for()
    server, thread = start_http_server(port, addr=host, registry=cluster_registry(runtime))
    out.print(f"metrics at http://{host}:{server.server_port}/metrics", markup=False)
    try:
        thread.join()
    finally:
        runtime.close(cancel=False)
