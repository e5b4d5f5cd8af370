"""Raw arguments that no serializer on the way can carry are named before
anything tries: lone surrogates, NaN and Infinity, deep nesting, size."""

from __future__ import annotations

import json

import pytest

from runtime.registry.argument_limits import MAX_DEPTH, fault


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": "a.txt"},
        {"n": [1, 2.5, None, True]},
        {"x": nested(MAX_DEPTH - 1)},
        "{}",
        {"text": "café ✓ 😀"},
        json.dumps({"n": 1}),
    ],
)
def test_carryable_arguments_pass(arguments):
    assert fault(arguments) is None


def test_a_lone_surrogate_is_named_in_a_value_or_a_key():
    assert "lone surrogate" in fault({"path": "a\ud800b"})
    assert "lone surrogate" in fault({"\udfff": 1})
    assert "lone surrogate" in fault('{"path": "\ud800"}')
    assert "lone surrogate" in fault('{"path": "\\ud800"}')  # the JSON escape, as a model sends it


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused(number):
    assert "JSON cannot carry" in fault({"n": [number]})


def test_nan_in_a_json_string_is_refused():
    assert "NaN" in fault('{"n": NaN}')


def test_nesting_past_the_bound_is_refused_without_recursion():
    assert fault({"x": nested(10_000)}) == fault({"x": nested(MAX_DEPTH + 1)})
    assert f"more than {MAX_DEPTH}" in fault({"x": nested(10_000)})
    assert f"more than {MAX_DEPTH}" in fault("[" * 10_000 + "]" * 10_000)


def test_size_past_the_bound_is_refused():
    assert "past the bound of 1,024" in fault({"content": "x" * 2000}, max_bytes=1024)
    assert "past the bound" in fault(json.dumps({"content": "x" * 2000}), max_bytes=1024)
    assert fault({"content": "x" * 900}, max_bytes=1024) is None
