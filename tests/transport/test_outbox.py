"""What a task message looks like on its way to a worker: its queue, and what
Flower is shown of it (the tool's name and redacted arguments, never more)."""

import json
from pathlib import Path

from runtime.keyspace.names import EFFECTS, READS
from runtime.transport.outbox import task_options
from runtime.types import CallMessage
from tests.support.messages import message

SECRET = "sk-ant-api03-" + "S3cr3t" * 6


def test_flower_sees_the_tool_and_redacted_arguments_only():
    signed = message("c1", "write_file", {"path": "a", "content": SECRET}, workspace=Path("."))
    options = task_options(CallMessage.from_wire(signed), EFFECTS)
    assert options["queue"] == EFFECTS and options["shadow"] == "toolrun.write_file"
    assert options["args"] == [signed]
    shown = json.loads(options["argsrepr"])[0]
    assert shown["tool"] == "write_file" and shown["call_id"] == "c1"
    assert SECRET not in options["argsrepr"] and options["kwargsrepr"] == "{}"
    assert options["ignore_result"] is True


def test_the_queue_is_the_one_asked_for():
    signed = message("c1", "nap", {"label": "x"}, workspace=Path("."))
    assert task_options(CallMessage.from_wire(signed), READS)["queue"] == READS


def test_the_message_carries_the_time_it_was_posted():
    signed = message("c1", "nap", {"label": "x"}, workspace=Path("."))
    options = task_options(CallMessage.from_wire(signed), READS, sent_at=1764560000.25)
    assert options["args"] == [{**signed, "sent_at": 1764560000.25}]
