"""A bound on request bodies (TOOLRUN_GATEWAY_MAX_BODY_BYTES): a body over it
is a 413 problem, found from its Content-Length or, without one, while it is
read, so the gateway never holds more than the bound of any request."""

from __future__ import annotations

from starlette.exceptions import HTTPException


def too_large(limit: int) -> HTTPException:
    # An HTTPException, because FastAPI turns anything else raised while it
    # reads a body into a 400 "error parsing the body".
    return HTTPException(413, f"a request body may be up to {limit} bytes")


class BodyLimit:
    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        scope.setdefault("state", {})["body_declared_too_large"] = (
            not declared.isdigit() or int(declared) > self.limit
        )
        seen = 0

        async def bounded():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit or scope["state"]["body_declared_too_large"]:
                    raise too_large(self.limit)  # inside the route: the problem handler answers
            return message

        await self.app(scope, bounded, send)
