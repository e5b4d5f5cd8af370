"""The names processes must agree on: every key of a batch under its prefix, and
the batch found again from its channel."""

from __future__ import annotations

from fnmatch import fnmatchcase

from runtime.keyspace import names


def test_a_batch_s_channel_matches_the_pattern_and_names_the_batch():
    channel = names.results_key("b-1:x")
    assert fnmatchcase(channel, names.BATCH_CHANNELS)
    assert names.batch_of(channel) == "b-1:x"
    assert not fnmatchcase(names.reply_channel("client-1"), names.BATCH_CHANNELS)


def test_each_key_of_a_batch_is_its_own():
    keys = [
        names.results_key("b1"),
        names.cancel_key("b1"),
        names.deliveries_key("b1"),
        names.handed_on_key("b1", "c1"),
        names.sent_key("b1"),
        names.stages_key("b1"),
    ]
    assert len(set(keys)) == len(keys) and all("b1" in key for key in keys)
    assert names.results_key("b1") != names.results_key("b2")
    assert set(names.QUEUES) == {names.READS, names.EFFECTS}
