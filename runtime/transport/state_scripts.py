"""A worker's two round trips per call as one Lua script each: its look before
the tool runs and the publish of its end after (docs/architecture.md, "Round
trips and memory").

Sent as pipelines they were five and eight to eleven commands, each one packed
and parsed by redis-py and dispatched by Redis; as a script each is one
EVALSHA. Scripts run whole or not at all, so either does all that its
pipeline did or nothing of it: what one pipeline command could miss (a lost
connection midway) was retried whole before as now. A rider (flow control's
take and finish, a chain step's read) goes after the script on one pipeline
(`runtime.transport.riding`). UNLOOK takes a look back (a call that waits
for its limits was not taken)."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.keyspace.names import (
    CALLS_TALLY,
    LEASES,
    SECONDS_TALLY,
    TTL_SECONDS,
    cancel_key,
    deliveries_key,
    lease_member,
    plan_key,
    results_key,
    stages_key,
)
from runtime.transport import tallies
from runtime.transport.leases import clocked
from runtime.types import ToolResult

# KEYS: cancel flag, deliveries, results, leases. ARGV: call id, TTL, lease
# member, lease seconds ("" takes none; on Redis's clock). The cancel flag,
# the delivery (counted), the end stored (or false).
LOOK = clocked("""
local cancelled = redis.call('EXISTS', KEYS[1])
local delivery = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('EXPIRE', KEYS[2], ARGV[2])
local stored = redis.call('HGET', KEYS[3], ARGV[1])
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[4], 'GT', text(now + tonumber(ARGV[4])), ARGV[3])
end
return {cancelled, delivery, stored}
""")

# KEYS: results, stages, leases, calls tally, seconds tally, plan.
# ARGV: call id, stored end, channel, announced text, TTL, stage ("": not
# counted), lease member, calls tally field, seconds bucket field ("": it did
# not run), seconds sum field, seconds, next step's lease member ("": none) and
# seconds (on Redis's clock), "1" to drop the plan's copy. The stage's count
# of ends (or false).
PUBLISH = clocked("""
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('PUBLISH', ARGV[3], ARGV[4])
local done = false
if ARGV[6] ~= '' then
  done = redis.call('HINCRBY', KEYS[2], ARGV[6], 1)
  redis.call('EXPIRE', KEYS[2], ARGV[5])
end
redis.call('ZREM', KEYS[3], ARGV[7])
redis.call('HINCRBY', KEYS[4], ARGV[8], 1)
if ARGV[9] ~= '' then
  redis.call('HINCRBY', KEYS[5], ARGV[9], 1)
  redis.call('HINCRBYFLOAT', KEYS[5], ARGV[10], ARGV[11])
end
if ARGV[12] ~= '' then
  redis.call('ZADD', KEYS[3], 'GT', text(now + tonumber(ARGV[13])), ARGV[12])
end
if ARGV[14] == '1' then redis.call('DEL', KEYS[6]) end
return done
""")


def look_call(batch_id: str, call_id: str, hold: float | None) -> tuple[list[str], list]:
    """LOOK's keys and arguments."""
    keys = [cancel_key(batch_id), deliveries_key(batch_id), results_key(batch_id), LEASES]
    seconds = "" if hold is None else repr(hold)
    return keys, [call_id, TTL_SECONDS, lease_member(batch_id, call_id), seconds]


@dataclass(frozen=True)
class Publication:
    """One end to store and publish: what PUBLISH is given
    (`runtime.transport.riding`)."""

    batch_id: str
    result: ToolResult
    payload: str  # the end as stored
    channel: str
    announced: str  # the end as published on `channel`
    stage: int | None  # its stage, whose count of ends goes up by one; None: not counted
    hold: tuple[str, float] | None  # a chain's next step: its lease, for so many seconds
    drop_plan: bool  # the batch's plan copy goes with it


def publish_call(p: Publication) -> tuple[list[str], list]:
    """PUBLISH's keys and arguments."""
    batch_id, hold = p.batch_id, p.hold
    keys = [
        results_key(batch_id),
        stages_key(batch_id),
        LEASES,
        CALLS_TALLY,
        SECONDS_TALLY,
        plan_key(batch_id),
    ]
    counted, bucket, total, seconds = tallies.fields(p.result)
    held = ("", "") if hold is None else (lease_member(batch_id, hold[0]), hold[1])
    args = [
        p.result.call_id,
        p.payload,
        p.channel,
        p.announced,
        TTL_SECONDS,
        "" if p.stage is None else str(p.stage),
        lease_member(batch_id, p.result.call_id),
        counted,
        bucket or "",
        total,
        repr(seconds),
        held[0],
        repr(held[1]) if hold is not None else "",
        "1" if p.drop_plan else "",
    ]
    return keys, args


# A look taken back: its delivery uncounted (the field gone at none) and its
# lease dropped. KEYS: the deliveries, the leases; ARGV: call id, member.
UNLOOK = """
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
redis.call('ZREM', KEYS[2], ARGV[2])
return 0
"""
