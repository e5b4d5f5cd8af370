"""Fair share of the reads queue in Redis (docs/architecture.md, "Flow
control"): at most N of one submitter's reads in the shared queue or
running; the rest wait parked in a list of that submitter, and the worker
that ends one of its reads sends the next (`next_reads`)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from runtime import clock
from runtime.flow.throttle_scripts import ADMIT_READS, NEXT_READS, PARKED
from runtime.keyspace.names import (
    PARKING,
    TTL_SECONDS,
    in_flight_key,
    lease_member,
    parked_key,
    parked_set_key,
    sent_key,
)
from runtime.keyspace.scripted import Scripted, reached

IN_FLIGHT_SECONDS = 600.0  # a read in flight whose end never came frees its place after this
Reads = tuple[str, int, str, Sequence[tuple[str, str]]]  # submitter, cap, batch, (call id, message)


class FairShare(Scripted):
    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self._parked = self.script(PARKED)
        self._admit_reads = self.script(ADMIT_READS)
        self._next_reads = self.script(NEXT_READS)

    @property
    def next_reads_sha(self) -> str:
        return self._next_reads.sha

    @reached
    def shares(self) -> dict[str, tuple[int, int]]:
        """Each submitter's reads in flight and parked (`/metrics`)."""
        found = {}
        head, tail = in_flight_key("\0").split("\0")
        for key in self.client.scan_iter(match=in_flight_key("*"), count=500):
            who = key.decode().removeprefix(head).removesuffix(tail)
            found[who] = (
                int(self.client.zcount(key, clock.now(), "+inf")),
                int(self.client.llen(parked_key(who))),
            )
        return found

    # Fair share of the reads queue.
    @reached
    def parked(self, principal: str, members: Sequence[str]) -> list[bool]:
        if not members:
            return []
        found = self._parked(keys=[parked_set_key(principal)], args=list(members))
        return [bool(n) for n in found]

    @reached
    def admit_reads(
        self, principal: str, cap: int, batch_id: str, calls: Sequence[tuple[str, str]]
    ) -> list[bool]:
        """For each (call id, message JSON) of a batch: True to send now;
        False parked, or sent already by another process."""
        if not calls:
            return []
        found = self._admit((principal, cap, batch_id, calls), clock.now(), mark=False)
        answer = _text(self._admit_reads(keys=found[:5], args=found[5:]))
        return [c == "s" for c in answer]

    @staticmethod
    def _admit(reads: Reads, now: float, *, mark: bool) -> list[str | float | int]:
        """ADMIT_READS's keys then arguments (`mark`: each read admitted is
        marked sent)."""
        principal, cap, batch_id, calls = reads
        keys = [*_share_keys(principal), sent_key(batch_id), PARKING]
        found = [*keys, now, now + IN_FLIGHT_SECONDS, cap, TTL_SECONDS, principal, int(mark)]
        for call_id, message in calls:
            found += [lease_member(batch_id, call_id), call_id, message]
        return found

    @reached
    def waiting(self) -> dict[str, str]:
        """Each submitter with parked reads, and the first of them (the sweep
        moves them on if no end of theirs did); one whose reads have all
        gone leaves the set."""
        found = {}
        for raw in self.client.smembers(PARKING):
            who = raw.decode()
            first = self.client.lindex(parked_key(who), 0)
            if first is None:
                self.client.srem(PARKING, who)
            else:
                found[who] = first.decode()
        return found

    @reached
    def next_reads(self, principal: str, cap: int, member: str = "") -> list[str]:
        """`member` (a read of `principal`) left the queue: the parked
        messages whose turn it is now, taken in flight."""
        now = clock.now()
        args = [now, now + IN_FLIGHT_SECONDS, cap, member]
        found = self._next_reads(keys=_share_keys(principal), args=args)
        return [m.decode() if isinstance(m, bytes) else m for m in found]


def _text(answer: bytes | str) -> str:
    return answer.decode() if isinstance(answer, bytes) else answer


def _share_keys(principal: str) -> list[str]:
    return [in_flight_key(principal), parked_key(principal), parked_set_key(principal)]
