"""The event streams and long polls each key holds open, capped by the
policy's `limits.size.waits_per_key`: in the class, and through a gateway
process of its own on the session stack (a 429 that says so)."""

from __future__ import annotations

import json

import pytest

from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Problem
from runtime.gateway.waits import Waits
from tests.support.gateway import running_gateway


def key(name: str) -> Key:
    return Key(id=name, name=name, role=Role.submitter, roots=None, max_mode=None)


def test_a_key_at_its_cap_gets_a_429_and_a_release_frees_one_once():
    waits, alice, bob = Waits(2), key("alice"), key("bob")
    first, _ = waits.take(alice), waits.take(alice)
    with pytest.raises(Problem) as caught:
        waits.take(alice)
    assert caught.value.status == 429 and "waits_per_key" in caught.value.detail
    waits.take(bob)  # another key's count is its own
    first()
    first()  # a second release does nothing
    assert waits.held("alice") == 1
    with waits.holding(alice, wait=0):  # a poll that does not wait holds nothing
        assert waits.held("alice") == 1
    with waits.holding(alice, wait=5):
        assert waits.held("alice") == 2
    assert waits.held("alice") == 1


def test_no_cap_holds_any_number():
    waits = Waits(None)
    for _ in range(100):
        waits.take(key("alice"))
    assert waits.held("alice") == 100


@pytest.fixture(scope="module")
def capped(stack, user_settings, tmp_path_factory):
    home = tmp_path_factory.mktemp("waits")
    policy = home / "policy.json"
    policy.write_text(json.dumps({"limits": {"size": {"waits_per_key": 1}}}))
    with running_gateway(
        stack, user_settings, home / "gateway.log", TOOLRUN_POLICY_FILE=str(policy)
    ) as running:
        yield running, home


def test_a_second_wait_of_one_key_is_a_429_through_the_gateway(capped):
    gateway, home = capped
    space = home / "space"
    space.mkdir()
    token = gateway.key("waiter", Role.submitter, roots=[space])
    other = gateway.key("other-waiter", Role.submitter, roots=[space])
    held = {"label": "w", "seconds": 3}
    with gateway.client(token) as client, gateway.client(token) as again:
        call = {"id": "n", "name": "nap", "arguments": held}
        posted = client.post("/v1/batches", json={"calls": [call], "workspace": str(space)})
        batch = posted.json()["batch_id"]
        with client.stream("GET", f"/v1/batches/{batch}/events") as stream:
            assert stream.status_code == 200  # the key's one wait, held while it streams
            answer = again.get(f"/v1/batches/{batch}", params={"wait": 5})
            assert answer.status_code == 429, answer.text
            assert answer.json()["title"] == "too many waits"
            assert again.get(f"/v1/batches/{batch}").status_code == 200  # no wait: no hold
            with gateway.client(other) as theirs:  # another key is not held back
                assert theirs.get(f"/v1/batches/{batch}/events").status_code in (200, 404)
            list(stream.iter_lines())  # to its end
        assert again.get(f"/v1/batches/{batch}", params={"wait": 5}).status_code == 200
