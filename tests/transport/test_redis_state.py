"""The state's round trips: what a submit, an advance and a chain step each
cost in Redis (a pipeline is one). Real redis-server."""

from __future__ import annotations

import pytest

from runtime.results.formatter import failure
from runtime.types import Status
from tests.support.round_trips import counted_state, round_trips

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    with counted_state(tmp_path_factory.mktemp("redis-state")) as found:
        yield found


def test_the_submits_plan_copy_goes_with_its_send_marks_in_one_round_trip(state):
    plan = {"batch": {"id": "rs-submit"}, "stages": []}
    marked, trips = round_trips(lambda: state.mark_sent("rs-submit", ["c1", "c2"], plan=plan))
    assert (marked, trips) == (["c1", "c2"], 1)
    assert state.plan("rs-submit") == plan
    assert set(state.sent("rs-submit")) == {"c1", "c2"}
    assert state.mark_sent("rs-submit", ["c1", "c3"]) == ["c3"]  # marked once only
    marked, trips = round_trips(lambda: state.mark_sent("rs-plan-only", [], plan=plan))
    assert (marked, trips, state.plan("rs-plan-only")) == ([], 1, plan)


def test_what_an_advance_reads_of_the_state_comes_in_one_round_trip(state):
    from runtime.results import formatter

    batch = "rs-known"
    state.mark_sent(batch, ["c1", "c2", "c3"])
    state.look(batch, "c1", hold=60)  # c1 taken, its lease held
    state.look(batch, "c2")  # c2 taken, no lease
    ended = formatter.success("c2", "nap", "slept", max_bytes=1024)
    state.publish(batch, ended, reply_to=None)
    state.cancel(batch, by="ops")
    known, trips = round_trips(lambda: state.known(batch, ["c1", "c2", "c3"]))
    assert trips == 1
    assert set(known.sent) == {"c1", "c2", "c3"}
    assert known.started == {"c1", "c2"}
    assert known.cancelled
    assert known.ends == {"c2": ended}
    assert set(known.holds) == {"c1"} and 30 < known.holds["c1"] <= 60  # seconds left
    nothing, trips = round_trips(lambda: state.known("rs-none", []))
    assert trips == 1
    assert (nothing.sent, nothing.started, nothing.cancelled, nothing.ends, nothing.holds) == (
        {},
        set(),
        False,
        {},
        {},
    )


def test_publishing_a_chain_steps_end_takes_the_next_steps_lease_in_one_round_trip(state):
    """The end stored and counted, its lease released, and the lease of the
    step claimed with it taken ("A chain in one task")."""
    from runtime.results import formatter

    state.hold("rs-chain", "a", 30)
    done = formatter.success("a", "bump", "bumped", max_bytes=1024)
    state.publish("rs-chain-first", done, reply_to=None)  # a process's first loads the script
    count, trips = round_trips(
        lambda: state.publish("rs-chain", done, reply_to=None, stage=0, hold=("b", 30))
    )
    assert (count, trips) == (1, 1)
    assert state.recall("rs-chain", "a") == done
    assert set(state.holds("rs-chain", ["a", "b"])) == {"b"}


def warm(state, batch: str = "rs-warm") -> None:
    """A process's first look and publish load their scripts (redis-py's
    `Script`): a test counting round trips takes that out of its count. The
    publish counts one end of `batch`'s stage 0."""
    from runtime.results import formatter

    state.look(batch, "warm", hold=60)
    ended = formatter.success("warm", "nap", "slept", max_bytes=1024, duration_ms=3.0)
    state.publish(batch, ended, reply_to=None, stage=0)


class Riding:
    """A rider as flow control's are: one command on the state's pipeline."""

    def __init__(self, key: str) -> None:
        self.key, self.answers = key, None

    def ride(self, pipe) -> None:
        pipe.incr(self.key)

    def landed(self, answers) -> None:
        self.answers = answers


def test_flow_control_rides_the_look_and_the_publish_without_a_round_trip_more(state):
    from runtime.results import formatter

    warm(state)
    rider = Riding("rs-rider")
    look, trips = round_trips(lambda: state.look("rs-ride", "c1", hold=60, rider=rider))
    assert (look.delivery, trips, rider.answers) == (1, 1, [1])
    ended = formatter.success("c1", "nap", "slept", max_bytes=1024)
    count, trips = round_trips(
        lambda: state.publish("rs-ride", ended, reply_to=None, stage=0, rider=rider)
    )
    assert (count, trips, rider.answers) == (1, 1, [2])


def test_a_look_taken_back_leaves_the_call_untaken(state):
    """A read that must wait for its limit after its look: the batch sees it
    neither taken nor held, and its next delivery counts as its first."""
    state.mark_sent("rs-unlook", ["c1"])
    state.look("rs-unlook", "c1", hold=60)
    state.unlook("rs-unlook", "c1")
    known = state.known("rs-unlook", ["c1"])
    assert (known.started, known.holds) == (set(), {})
    assert state.look("rs-unlook", "c1").delivery == 1


def test_the_first_end_staked_for_a_call_is_the_one_kept(state):
    """Two ends that may each have ended a call (their rows wait for the
    ledger): the first stored stays, the second is told so, in one round trip."""
    first = failure("a", "t", Status.outcome_unknown, "the process was lost", kind="lost")
    second = failure("a", "t", Status.error, "the ledger is unavailable", kind="ledger")
    staked, trips = round_trips(lambda: state.stake("rs-stake", first))
    assert (staked, trips) == (True, 1)
    assert state.stake("rs-stake", second) is False
    assert state.stake("rs-stake", first) is False  # stored already, even if the same
    assert state.recall("rs-stake", "a").status is Status.outcome_unknown


def test_a_look_and_a_publish_are_one_command_each_and_do_what_their_pipelines_did(state):
    """Without a rider each goes as one script (`transport/state_scripts.py`):
    the look counts the delivery, reads the cancel flag and the stored end and
    takes the lease; the publish stores, announces, counts the stage and the
    operators' figures, and releases the lease."""
    from runtime.keyspace.names import CALLS_TALLY, SECONDS_TALLY
    from runtime.results import formatter
    from runtime.transport.tallies import Tallies

    batch = "rs-scripts"
    warm(state, batch)
    client = state.client
    commands = client.info("commandstats")

    def sent(name: str) -> int:
        return client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0) - (
            commands.get(f"cmdstat_{name}", {}).get("calls", 0)
        )

    look, trips = round_trips(lambda: state.look(batch, "c1", hold=60))
    assert (look.cancelled, look.delivery, look.result, trips) == (False, 1, None, 1)
    assert (sent("evalsha"), sent("hincrby"), sent("zadd")) == (1, 1, 1)  # run by the script
    assert set(state.holds(batch, ["c1"])) == {"c1"}
    calls_before = Tallies(client).read().calls.get(("nap", "ok"), 0)
    done = formatter.success("c1", "nap", "slept", max_bytes=1024, duration_ms=20.0)
    count, trips = round_trips(lambda: state.publish(batch, done, reply_to=None, stage=0))
    assert (count, trips, sent("evalsha")) == (2, 1, 2)
    figures = Tallies(client).read()
    assert figures.calls[("nap", "ok")] == calls_before + 1
    assert figures.run_times["nap"].buckets["0.025"] == 1
    assert client.hget(SECONDS_TALLY, "nap\nsum") is not None and client.exists(CALLS_TALLY)
    assert state.holds(batch, ["c1"]) == {}
    again = state.look(batch, "c1", hold=60)
    assert (again.delivery, again.result) == (2, done)
    state.cancel(batch, by="ops")
    assert state.look(batch, "c2").cancelled
    state.mark_sent(batch, [], plan={"batch": {"id": batch}, "stages": []})
    last = formatter.success("c2", "nap", "x", max_bytes=1024)
    assert state.publish(batch, last, reply_to=None, drop_plan=True) is None  # no stage counted
    assert state.plan(batch) is None and state.recall(batch, "c2") == last


def test_a_chain_steps_publish_reads_the_end_of_the_step_it_takes_the_lease_of(state):
    """What `hold` reads on its own, the end published for the next step (a
    delivery of it that failed closed), rides the publish that takes its lease."""
    from runtime.results import formatter
    from runtime.transport.riding import Recalled

    warm(state)
    done = formatter.success("a", "bump", "bumped", max_bytes=1024)
    for batch, stored in (("rs-recall-none", None), ("rs-recall-one", "b")):
        if stored:
            state.stake(batch, failure(stored, "t", Status.error, "the ledger is unavailable"))
        recalled = Recalled(batch, "b")
        count, trips = round_trips(
            lambda batch=batch, recalled=recalled: state.publish(
                batch, done, reply_to=None, stage=0, hold=("b", 30), rider=recalled
            )
        )
        assert (count, trips, recalled.known) == (1, 1, True)
        assert recalled.result == (state.recall(batch, "b") if stored else None)
        assert set(state.holds(batch, ["a", "b"])) == {"b"}


def test_a_script_redis_lost_runs_alone_after_its_riders_which_run_once(state):
    """Redis restarted and lost the state's scripts: the look's and the
    publish's EVALSHA answer NOSCRIPT and do nothing, their riders' commands
    run, and then each script runs on its own (loaded again): every command
    once."""
    from runtime.results import formatter

    state.client.script_flush()
    rider = Riding("rs-lost-rider")
    look = state.look("rs-lost", "c1", hold=60, rider=rider)
    assert (look.delivery, rider.answers) == (1, [1])
    state.client.script_flush()
    ended = formatter.success("c1", "nap", "slept", max_bytes=1024)
    count = state.publish("rs-lost", ended, reply_to=None, stage=0, rider=rider)
    assert (count, rider.answers) == (1, [2])
    assert state.recall("rs-lost", "c1").status is Status.ok
    assert state.look("rs-lost", "c1", hold=60).delivery == 2


def test_a_script_redis_lost_runs_once_when_nothing_rides_it(state):
    """With no rider, the look's and the publish's EVALSHA go on a pooled
    connection of their own: NOSCRIPT (it did nothing) loads the script and
    runs it once, and the connection goes back to the pool."""
    from runtime.results import formatter

    pool = state.client.connection_pool
    state.client.script_flush()
    assert state.look("rs-alone", "c1", hold=60).delivery == 1
    state.client.script_flush()
    ended = formatter.success("c1", "nap", "slept", max_bytes=1024)
    assert state.publish("rs-alone", ended, reply_to=None, stage=0) == 1
    assert state.look("rs-alone", "c1", hold=60).delivery == 2
    assert state.recall("rs-alone", "c1").status is Status.ok
    assert not pool._in_use_connections
