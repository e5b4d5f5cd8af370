"""The approvals page's sign-in for tests that speak HTTP to it: the session
cookie is Secure, so a cookie jar keeps it off plain http://127.0.0.1; these
helpers carry it by hand."""

from __future__ import annotations

import re

import httpx

from tests.support.gateway import Gateway
from tests.support.waiting import wait_for


def sign_in(gateway: Gateway, token: str) -> httpx.Response:
    with gateway.client() as client:
        return client.post(
            "/approvals/sign-in",
            content=f"key={token}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )


def session_cookie(gateway: Gateway, token: str) -> str:
    answer = sign_in(gateway, token)
    assert answer.status_code == 303, answer.text
    found = re.match(r"toolrun_session=([^;]+)", answer.headers["set-cookie"])
    assert found, answer.headers["set-cookie"]
    return found.group(1)


def signed_in(gateway: Gateway, token: str) -> httpx.Client:
    """A client that carries the session of `token` (and nothing else)."""
    cookie = session_cookie(gateway, token)
    return httpx.Client(base_url=gateway.url, headers={"Cookie": f"toolrun_session={cookie}"})


def csrf_of(client: httpx.Client) -> str:
    page = client.get("/approvals")
    assert page.status_code == 200, page.text
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)


def waiting(gateway: Gateway, token: str, space, name: str = "w.txt") -> str:
    """A batch whose one write waits for approval; its id once the ledger lists it."""
    body = {
        "calls": [{"id": "w", "name": "write_file", "arguments": {"path": name, "content": "hi"}}],
        "workspace": str(space),
        "mode": "default",
    }
    with gateway.client(token) as client:
        batch_id = client.post("/v1/batches", json=body).json()["batch_id"]
        wait_for(
            lambda: client.get("/v1/approvals", params={"batch": batch_id}).json()["approvals"],
            60,
            "the write to wait for approval",
            every=0.2,
        )
    return batch_id
