"""A worker's look at a call and the publish of its end when flow control
rides them (`BatchState.look`'s and `publish`'s `rider`: the call's take of
its hits and slots, its finish): pipelines, with the rider's own commands
(its scripts, as EVALSHA) put at their end, one round trip for both. Without
a rider each is one script (`runtime.transport.state_scripts`)."""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.client import Pipeline

from runtime.transport import tallies
from runtime.transport.base import Rider
from runtime.transport.names import (
    LEASES,
    TTL_SECONDS,
    cancel_key,
    deliveries_key,
    lease_member,
    plan_key,
    results_key,
    stages_key,
)
from runtime.transport.state_scripts import Publication
from runtime.types import ToolResult


def look(
    client: redis.Redis, batch_id: str, call_id: str, hold: float | None, rider: Rider
) -> tuple[Any, Any, Any]:
    """LOOK's answers (cancel flag, delivery, stored end), `rider` told its own."""
    with client.pipeline(transaction=False) as pipe:
        pipe.exists(cancel_key(batch_id))
        pipe.hincrby(deliveries_key(batch_id), call_id, 1)
        pipe.expire(deliveries_key(batch_id), TTL_SECONDS)
        pipe.hget(results_key(batch_id), call_id)
        if hold is not None:
            until = time.time() + hold
            pipe.zadd(LEASES, {lease_member(batch_id, call_id): until}, gt=True)
        found, theirs = _carrying(pipe, rider)
    rider.landed(theirs)
    return found[0], found[1], found[3]


def publish(client: redis.Redis, p: Publication, rider: Rider) -> int | None:
    """PUBLISH's work (its stage's count of ends, if counted), `rider` told its own."""
    batch_id, call_id = p.batch_id, p.result.call_id
    with client.pipeline(transaction=False) as pipe:
        pipe.hset(results_key(batch_id), call_id, p.payload)
        pipe.expire(results_key(batch_id), TTL_SECONDS)
        pipe.publish(p.channel, p.announced)
        if p.stage is not None:
            pipe.hincrby(stages_key(batch_id), str(p.stage), 1)
            pipe.expire(stages_key(batch_id), TTL_SECONDS)
        pipe.zrem(LEASES, lease_member(batch_id, call_id))
        tallies.tally(pipe, p.result)  # the operators' figures, in the same round trip
        if p.hold is not None:  # a chain's next step (`BatchState.publish`)
            member = lease_member(batch_id, p.hold[0])
            pipe.zadd(LEASES, {member: time.time() + p.hold[1]}, gt=True)
        if p.drop_plan:
            pipe.delete(plan_key(batch_id))
        done, theirs = _carrying(pipe, rider)
    rider.landed(theirs)
    return int(done[3]) if p.stage is not None else None


def _carrying(pipe: Pipeline, rider: Rider) -> tuple[list[Any], list[Any]]:
    """The pipeline's answers, and those of `rider`'s commands put at its end
    ("Flow control"): an error of the rider's (Redis lost its scripts) is
    its own to handle; one of the state's own commands raises as before."""
    own = len(pipe)
    rider.ride(pipe)
    found = pipe.execute(raise_on_error=False)
    for answer in found[:own]:
        if isinstance(answer, Exception):
            raise answer
    return found[:own], found[own:]


class Recalled:
    """The end published for a call, if any, read on the pipeline of a round
    trip made anyway: a chain step's publish, which takes the lease of the
    step claimed with its end, reads that step's end as `hold` does on its
    own (docs/architecture.md, "A chain in one task"). `known`: its answer
    landed; a state that carries no rider leaves it unknown, and the step
    reads it itself."""

    def __init__(self, batch_id: str, call_id: str) -> None:
        self.batch_id, self.call_id = batch_id, call_id
        self.known, self.result = False, None

    def ride(self, pipe: Pipeline) -> None:
        pipe.hget(results_key(self.batch_id), self.call_id)

    def landed(self, answers: list[Any] | None) -> None:
        if not answers or isinstance(answers[0], Exception):
            return
        self.known = True
        self.result = ToolResult.model_validate_json(answers[0]) if answers[0] else None
