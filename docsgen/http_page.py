"""docs/reference/http.md: every route of the gateway, from the OpenAPI
document its FastAPI app serves at /openapi.json, built on a throwaway home
(no Redis is reached: building the app connects to nothing)."""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INTRO = """\
# HTTP API

`toolrun serve` (and `toolrun up`, and compose's `gateway` service) serve the
API below; [the how-to](../how-to/http-api.md) shows it in use. This page is
generated from the gateway's OpenAPI document when the site is built; a running
gateway serves the same document at `/openapi.json`.
[openapi.json](openapi.json) is a copy of it.

Send `Authorization: Bearer <token>` (a key from `toolrun keys create`). Errors
are `application/problem+json` bodies.

"""
METHODS = ("get", "head", "post", "put", "patch", "delete", "options")


@contextmanager
def gateway_app() -> Iterator[Any]:
    """The gateway's FastAPI app as `toolrun serve` builds it, on a throwaway home."""
    from runtime.client import Runtime
    from runtime.gateway.app import create_app
    from runtime.settings import Settings

    with tempfile.TemporaryDirectory(prefix="toolrun-docs-") as home:
        settings = Settings(
            home=Path(home),
            user_settings_file=Path(home) / "none.json",
            redis_url="redis://127.0.0.1:9/0",  # never reached: the app is only described
            signing_key=secrets.token_hex(32),  # signs nothing: no batch is submitted
        )
        runtime = Runtime(settings)
        try:
            yield create_app(settings, runtime)
        finally:
            runtime.close(cancel=False)


def document() -> dict[str, Any]:
    with gateway_app() as app:
        return app.openapi()


def routes(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(schema_name(s) for s in schema["anyOf"])
    return schema.get("type", "object")


def what(op: dict[str, Any]) -> str:
    """The first paragraph of the route's docstring (FastAPI's own summary is
    only the function's name, title-cased)."""
    text = (op.get("description") or op.get("summary") or "").strip()
    return cell(text.split("\n\n")[0])


def operation_section(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"## `{method} {path}`", ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | what |", "|---|---|---|---|---|"]
        for p in params:
            kind = schema_name(p.get("schema", {}))
            required = "yes" if p.get("required") else ""
            what = cell(p.get("description", ""))
            lines.append(f"| `{p['name']}` | {p['in']} | {kind} | {required} | {what} |")
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Body: `{media}`, {schema_name(content.get('schema', {}))}.", ""]
    responses = op.get("responses", {})
    if responses:
        answers = ", ".join(
            f"{code} {r.get('description', '')}".strip() for code, r in responses.items()
        )
        lines += [f"Answers: {cell(answers)}.", ""]
    return "\n".join(lines)


def schemas_section(doc: dict[str, Any]) -> str:
    found = doc.get("components", {}).get("schemas", {})
    if not found:
        return ""
    lines = ["## Bodies", ""]
    for name, schema in found.items():
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [schema["description"].strip(), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            lines += ["| field | type | required | what |", "|---|---|---|---|"]
            for field, spec in props.items():
                need = "yes" if field in required else ""
                what = cell(spec.get("description", spec.get("title", "")))
                lines.append(f"| `{field}` | {schema_name(spec)} | {need} | {what} |")
            lines.append("")
    return "\n".join(lines)


def page(doc: dict[str, Any]) -> str:
    index = ["| route | what |", "|---|---|"]
    for method, path, op in routes(doc):
        index.append(f"| `{method} {path}` | {what(op)} |")
    sections = [operation_section(*route) for route in routes(doc)]
    return (
        INTRO
        + "\n".join(index)
        + "\n\n"
        + page_section()
        + "\n".join(sections)
        + schemas_section(doc)
    )


PAGE_INTRO = """\
## The approvals page

For people in a browser, not for programs, so not in the OpenAPI document:
sign in at `/approvals/sign-in` with a key; the browser then holds a session
cookie (not the key), and every answer carries the page's CSRF token
([the how-to](../how-to/approvals-page.md)).

| route | what |
|---|---|
"""


def page_section() -> str:
    """The approvals page's routes (runtime/gateway/page/views.py), from their docstrings."""
    from runtime.gateway.page.views import router

    rows = []
    for route in router.routes:
        summary = (route.endpoint.__doc__ or "").strip().split("\n\n")[0]
        rows += [
            f"| `{method} {route.path}` | {cell(summary)} |" for method in sorted(route.methods)
        ]
    return PAGE_INTRO + "\n".join(rows) + "\n\n"


def openapi_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"
