"""Routes around the batches: tool definitions, health, readiness and metrics
(docs/architecture.md, "The HTTP gateway"). Only the health checks are open."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from runtime import adapters
from runtime.gate.permissions import offered
from runtime.gateway import roles
from runtime.gateway.auth import bearer
from runtime.gateway.keys import Key
from runtime.gateway.metrics import CONTENT_TYPE
from runtime.gateway.problems import Problem
from runtime.types import Mode

router = APIRouter()
Authorized = Annotated[Key, Depends(bearer)]


@router.get("/v1/tools", tags=["tools"])
def tools(
    request: Request,
    key: Authorized,
    format: Literal["anthropic", "openai", "responses", "mcp"] = "anthropic",
    mode: Mode | None = None,
    workspace: Annotated[str | None, Query(max_length=4096)] = None,
) -> dict[str, Any]:
    """The tool definitions to give the model; with `mode`, those that can run
    there, under the workspace's trust and rules."""
    runtime = request.app.state.gateway.runtime
    specs = list(runtime.registry)
    if mode is not None:
        mode = roles.mode_for(key, mode)
        policy = None
        if workspace is not None or key.roots:
            where = roles.workspace_for(key, workspace)
            policy = runtime.policies.policy_for(Path(where))
        specs = [spec for spec in specs if offered(spec, mode, policy)]
    return {"tools": adapters.definitions(specs, format)}


# One route of two methods, so a 405 names both in `Allow`; its HEAD operation is
# named apart in the OpenAPI document by `one_id_per_operation`.
@router.api_route("/healthz", methods=["GET", "HEAD"], tags=["health"], operation_id="health")
def health() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", tags=["health"])
def ready(request: Request) -> dict[str, str]:
    """Redis, the broker (when it is not that Redis) and the ledger answer:
    the gateway can take batches."""
    try:
        request.app.state.gateway.runtime.deployment.ping()
    except Exception as error:  # noqa: BLE001 - any fault means not ready
        raise Problem(503, "not ready", f"{type(error).__name__}: {error}") from None
    return {"status": "ready"}


@router.get("/metrics", tags=["health"])
def metrics(request: Request, key: Authorized) -> Response:
    """Prometheus text: requests by route and status, batches, streams, events;
    the cluster's calls by tool and status, run times, calls waiting and running
    per queue, approvals pending; usage and limits per key, every key's for an
    admin or metrics key, its own for any other."""
    return Response(request.app.state.gateway.metrics.text(key), media_type=CONTENT_TYPE)


def one_id_per_operation(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with one operationId per operation: FastAPI gives every
    method of a route the route's one id, which client generators reject (two
    functions of one name), so each method after the first has its name appended
    (`health`, `health_head`)."""
    for operations in document.get("paths", {}).values():
        seen: set[str] = set()
        for method, operation in operations.items():
            name = operation.get("operationId")
            if name in seen:
                operation["operationId"] = f"{name}_{method}"
            seen.add(name)
    return document
