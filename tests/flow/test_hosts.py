"""The host a per-host rate counts under: the address, whatever its spelling (issue 40)."""

from __future__ import annotations

import pytest

from runtime.flow.hosts import canonical_host


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("LOCALHOST.", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("[0:0::1]", "::1"),
        ("10.1", "10.0.0.1"),
    ],
)
def test_a_spelling_is_its_address(spelling, address):
    assert canonical_host(spelling) == address


def test_a_name_that_does_not_resolve_counts_under_its_spelling():
    assert canonical_host("No-Such-Host.invalid") == "no-such-host.invalid"
