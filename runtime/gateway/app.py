"""The HTTP gateway: an ASGI app over one `Runtime` (docs/architecture.md,
"The HTTP gateway"). It holds the signing key, the Redis URL and the ledger URL;
its clients hold only their API keys, and it signs task messages on behalf of
the keys it has authenticated."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from runtime.client import Runtime
from runtime.gateway import approvals, batches, problems, service, usage
from runtime.gateway.auth import Standing
from runtime.gateway.bodies import BodyLimit
from runtime.gateway.cursors import Cursors
from runtime.gateway.handles import Handles
from runtime.gateway.metrics import CountRequests, Metrics
from runtime.gateway.page import views as page
from runtime.gateway.shortcuts import Shortcuts
from runtime.gateway.waits import Waits
from runtime.ledger.keys import Keys
from runtime.redaction import Redactor, redactor_for
from runtime.settings import Settings, get_settings


def redacted_json(redactor: Redactor) -> type[JSONResponse]:
    """The response class of one gateway: every JSON body it returns passes its
    redactor (from its settings), whatever route made it."""

    class RedactedJSON(JSONResponse):
        def render(self, content: Any) -> bytes:
            return super().render(redactor.redact(content))

    return RedactedJSON


@dataclass
class Gateway:
    runtime: Runtime
    keys: Keys
    handles: Handles
    metrics: Metrics
    org_allows: list[str]  # what a submitter key's batch rules may allow
    standing: Standing  # whether the key of an open stream or poll is still live
    cursors: Cursors  # this process's logs of its streams, for short event ids
    waits: Waits  # the streams and long polls each key holds open ("Flow control")
    json: type[JSONResponse]  # the redacted JSON response, for routes that build their own


def create_app(settings: Settings | None = None, runtime: Runtime | None = None) -> FastAPI:
    settings = settings or get_settings()
    runtime = runtime or Runtime(settings)
    redactor = redactor_for(runtime.settings.redaction_patterns)
    org = runtime.policies.org.get("permissions", {})
    keys = Keys(runtime.ledger)
    json_response = redacted_json(redactor)
    gateway = Gateway(
        runtime=runtime,
        keys=keys,
        handles=Handles(runtime),
        metrics=Metrics(runtime),
        org_allows=list(org.get("allow", [])),
        standing=Standing(keys),
        cursors=Cursors(),
        waits=Waits(
            runtime.policies.limits.size and runtime.policies.limits.size.waits_per_key,
            runtime.deployment.throttle,  # None: the in-process transport
        ),
        json=json_response,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        gateway.waits.close()
        runtime.close(cancel=False)  # the batches are the clients', and go on in the cluster

    app = FastAPI(
        title="toolrun",
        version="1",
        lifespan=lifespan,
        default_response_class=json_response,
        docs_url=None,  # no HTML pages (they load scripts from a CDN); /openapi.json stays
        redoc_url=None,
        description="Runs AI agents' tool calls: batches, events, approvals.",
    )
    app.state.gateway = gateway

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = service.one_id_per_operation(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi  # what /openapi.json answers
    problems.install(app, redactor)
    for router in (batches.router, approvals.router, service.router, usage.router, page.router):
        app.include_router(router)
    app.add_middleware(Shortcuts, api=app)  # inside the two below, as the routes are
    app.add_middleware(BodyLimit, limit=settings.gateway_max_body_bytes)
    app.add_middleware(CountRequests, metrics=gateway.metrics)
    return app
