"""A worker's look at a call and the publish of its end: the state's own
script (`runtime.transport.state_scripts`, one EVALSHA) and, when another
command rides them (`BatchState.look`'s and `publish`'s `rider`: flow
control's take of the call's hits and slots, its finish; a chain step's read
of the next step's end), the rider's commands after it on one pipeline, one
round trip.

A script Redis does not hold (a process's first use, or Redis restarted)
answers NOSCRIPT and did nothing: it is then run on its own (redis-py's
`Script` loads it), the rider's answers kept, so a rider's command never runs
twice and the state's runs once."""

from __future__ import annotations

from typing import Any

from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from runtime.keyspace.names import results_key
from runtime.transport.base import Rider
from runtime.transport.state_scripts import Publication, look_call, publish_call
from runtime.types import ToolResult


def look(
    script: Script, batch_id: str, call_id: str, hold: float | None, rider: Rider | None
) -> tuple[Any, Any, Any]:
    """LOOK's answers (cancel flag, delivery, stored end), `rider` told its own."""
    keys, args = look_call(batch_id, call_id, hold)
    return tuple(_riding(script, keys, args, rider))


def publish(script: Script, p: Publication, rider: Rider | None) -> int | None:
    """PUBLISH's work (its stage's count of ends, if counted), `rider` told its own."""
    keys, args = publish_call(p)
    done = _riding(script, keys, args, rider)
    return int(done) if p.stage is not None else None


def _riding(script: Script, keys: list[str], args: list, rider: Rider | None) -> Any:
    """`script`'s answer, with `rider`'s commands on the same round trip (no
    rider: the script alone, one EVALSHA): an error of the rider's (Redis
    lost its scripts) is its own to handle; one of the script's raises, but
    NOSCRIPT, which runs it on its own."""
    if rider is None:
        return script(keys=keys, args=args)
    with script.registered_client.pipeline(transaction=False) as pipe:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        rider.ride(pipe)
        found = pipe.execute(raise_on_error=False)
    own, theirs = found[0], found[1:]
    if isinstance(own, NoScriptError):
        own = script(keys=keys, args=args)
    elif isinstance(own, Exception):
        raise own
    rider.landed(theirs)
    return own


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
