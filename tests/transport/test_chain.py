"""Chains of ordered steps: which step comes next, and what the signature covers."""

from pathlib import Path

from runtime.results import formatter as results
from runtime.transport import chain, signing
from runtime.types import CallMessage, Status
from tests.support.messages import KEY, message


def result(status: Status = Status.ok):
    if status is Status.ok:
        return results.success("c", "bump", "done", max_bytes=1024)
    return results.failure("c", "bump", status, "no")


def steps(on_error: str = "stop") -> list[CallMessage]:
    return [
        CallMessage.from_wire(
            message(f"c{i}", "bump", {"label": str(i)}, workspace=Path("."), on_error=on_error)
        )
        for i in range(3)
    ]


def test_the_first_step_carries_the_rest_and_each_step_hands_on_the_next():
    head = chain.link(steps())
    assert [m.call_id for m in head.then] == ["c1", "c2"]
    second = chain.follow(head, result())
    assert second.call_id == "c1" and [m.call_id for m in second.then] == ["c2"]
    third = chain.follow(second, result())
    assert third.call_id == "c2" and third.then == []
    assert chain.follow(third, result()) is None


def test_a_failure_ends_the_chain_under_stop_but_not_under_continue():
    assert chain.follow(chain.link(steps("stop")), result(Status.error)) is None
    assert chain.follow(chain.link(steps("stop")), result(Status.outcome_unknown)) is None
    going_on = chain.follow(chain.link(steps("continue")), result(Status.error))
    assert going_on is not None and going_on.call_id == "c1"


def test_a_cancelled_step_ends_the_chain_whatever_on_error_says():
    assert chain.follow(chain.link(steps("continue")), result(Status.cancelled)) is None


def test_each_step_keeps_its_own_signature_whatever_it_carries():
    head = chain.link(steps())
    assert signing.genuine(head, KEY)
    assert all(signing.genuine(step, KEY) for step in head.then)
    assert head.wire()["then"][0] == head.then[0].wire()  # on the wire too
    tampered = head.then[0].model_copy(update={"arguments": {"label": "other"}})
    assert not signing.genuine(tampered, KEY)


def test_the_main_process_finds_each_step_of_a_delivered_chain_without_decoding_it():
    raw = chain.link(steps()).wire()
    assert chain.length(raw) == 3 and chain.length(steps()[0].wire()) == 1
    assert chain.step_of(raw, 0) is raw
    second = chain.step_of(raw, 1)
    assert second["call_id"] == "c1" and [m["call_id"] for m in second["then"]] == ["c2"]
    last = CallMessage.from_wire(chain.step_of(raw, 2))
    assert last.call_id == "c2" and last.then == [] and signing.genuine(last, KEY)
    assert chain.step_of(raw, 3) is None and chain.step_of(raw, -1) is None
    assert chain.step_of({"then": "no"}, 1) is None and chain.length(None) == 1
