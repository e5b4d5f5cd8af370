"""The event streams and long polls each key holds open, capped by the
policy's `limits.size.waits_per_key`: in the class (in one process, and
across processes through the session stack's Redis), and through two gateway
processes of their own on the session stack (a 429 that says so)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis

from runtime.flow.throttle import Throttle
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Problem
from runtime.gateway.waits import Waits
from runtime.keyspace.names import slots_key
from tests.support.gateway import running_gateway
from tests.support.waiting import wait_for


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


@pytest.fixture
def throttles(stack):
    clients = [redis.Redis.from_url(stack.redis_url) for _ in range(2)]
    yield [Throttle(client) for client in clients]
    for client in clients:
        client.close()


def test_the_cap_counts_the_waits_of_every_process_sharing_redis(throttles):
    """Two gateways' `Waits` (their own Redis connections): the key's cap is
    one count across both, and a release in one frees a place in the other."""
    alice = key(f"alice-{uuid.uuid4().hex[:8]}")
    here, there = Waits(2, throttles[0]), Waits(2, throttles[1])
    try:
        first = here.take(alice)
        there.take(alice)
        with pytest.raises(Problem) as caught:
            here.take(alice)  # this process holds one: the other's counts too
        assert caught.value.status == 429
        with pytest.raises(Problem):
            there.take(alice)
        first()
        there.take(alice)  # the place `here` freed
        with pytest.raises(Problem):
            here.take(alice)
    finally:
        here.close(), there.close()


def _took(waits: Waits, key: Key) -> bool:
    try:
        waits.take(key)
    except Problem:
        return False
    return True


def _expiry(throttle: Throttle, holder: Key) -> float:
    """When the one wait `holder` holds in Redis lapses unless renewed."""
    [(_, expiry)] = throttle.client.zrange(slots_key(f"waits:{holder.id}"), 0, -1, withscores=True)
    return expiry


def test_a_wait_of_a_process_that_died_lapses_and_one_renewed_does_not(throttles):
    bob, lease = key(f"bob-{uuid.uuid4().hex[:8]}"), 3.0
    dead, alive = Waits(1, throttles[0], lease=1.0), Waits(1, throttles[1], lease=lease)
    try:
        dead.take(bob)
        dead.close()  # it stops renewing, as a killed gateway would
        with pytest.raises(Problem):
            alive.take(bob)  # the dead one's slot is held until its lease lapses
        wait_for(lambda: _took(alive, bob), what="the dead process's wait lapsing", every=0.1)
        taken = time.time()
        # Renewed after its first lease would have lapsed: it still holds the place.
        wait_for(lambda: _expiry(throttles[0], bob) > taken + 2 * lease, what="a renewal")
        with pytest.raises(Problem):
            Waits(1, throttles[0], lease=lease).take(bob)
    finally:
        dead.close(), alive.close()


@pytest.fixture(scope="module")
def capped(stack, user_settings, tmp_path_factory):
    """Two gateway processes under one policy, on the session stack."""
    home = tmp_path_factory.mktemp("waits")
    policy = home / "policy.json"
    policy.write_text(json.dumps({"limits": {"size": {"waits_per_key": 1}}}))
    env = {"TOOLRUN_POLICY_FILE": str(policy)}
    with (
        running_gateway(stack, user_settings, home / "one.log", **env) as one,
        running_gateway(stack, user_settings, home / "two.log", **env) as two,
    ):
        yield one, two, home


def test_a_second_wait_of_one_key_is_a_429_through_another_gateway(capped):
    gateway, other_gateway, home = capped
    space = home / "space"
    space.mkdir()
    token = gateway.key("waiter", Role.submitter, roots=[space])
    other = gateway.key("other-waiter", Role.submitter, roots=[space])
    held = {"label": "w", "seconds": 3}
    with gateway.client(token) as client, other_gateway.client(token) as again:
        call = {"id": "n", "name": "nap", "arguments": held}
        posted = client.post("/v1/batches", json={"calls": [call], "workspace": str(space)})
        batch = posted.json()["batch_id"]
        with client.stream("GET", f"/v1/batches/{batch}/events") as stream:
            assert stream.status_code == 200  # the key's one wait, held while it streams
            answer = again.get(f"/v1/batches/{batch}", params={"wait": 5})
            assert answer.status_code == 429, answer.text  # held in the other gateway
            assert answer.json()["title"] == "too many waits"
            assert again.get(f"/v1/batches/{batch}").status_code == 200  # no wait: no hold
            with other_gateway.client(other) as theirs:  # another key is not held back
                assert theirs.get(f"/v1/batches/{batch}/events").status_code in (200, 404)
            # A submit that would wait is refused before anything is submitted:
            # its Idempotency-Key stays unused, free for another body.
            keyed = {"Idempotency-Key": "refused-wait"}
            body = {"calls": [{**call, "id": "m"}], "workspace": str(space)}
            refused = again.post("/v1/batches", json=body, params={"wait": 5}, headers=keyed)
            assert refused.status_code == 429, refused.text
            other_body = {"calls": [{**call, "id": "o"}], "workspace": str(space)}
            assert again.post("/v1/batches", json=other_body, headers=keyed).status_code == 202
            list(stream.iter_lines())  # to its end
        assert again.get(f"/v1/batches/{batch}", params={"wait": 5}).status_code == 200
