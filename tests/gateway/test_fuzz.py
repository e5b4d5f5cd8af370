"""Whatever a client sends to the submit route, the gateway answers 202 or a
4xx problem, never a 500: bodies of any JSON shape, bodies shaped like a batch
or a provider message with anything inside, and bytes that are not JSON."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PROBLEM = "application/problem+json"

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
names = st.sampled_from(["read_file", "write_file", "echo", "nope", ""]) | st.text(max_size=8)
calls = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=8) | values, "name": names}, optional={"arguments": values}
    ),
    max_size=4,
)
blocks = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["tool_use", "text", "function_call", "thinking"])},
        optional={
            "id": values,
            "name": names,
            "input": values,
            "arguments": values,
            "call_id": values,
        },
    ),
    max_size=3,
)
messages = (
    st.fixed_dictionaries({"role": st.just("assistant"), "content": blocks | values})
    | blocks
    | st.fixed_dictionaries({"tool_calls": st.lists(values, max_size=3)})
    | values
)
options = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["plan", "auto", "default", "bypass", "x"]) | values,
        "on_error": values,
        "timeout": values,
        "rules": values,
        "format": values,
    },
)
bodies = (
    st.builds(lambda c, o: {"calls": c, **o}, calls, options)
    | st.builds(lambda m, o: {"message": m, **o}, messages, options)
    | values
)


def _accepted(response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code != 202:
        assert 400 <= response.status_code < 500
        assert response.headers["content-type"] == PROBLEM, response.text


def test_any_json_body_is_202_or_a_4xx_problem(gateway, keys):
    with gateway.client(keys["submitter"]) as client:

        @settings(
            max_examples=150,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(bodies)
        def check(body) -> None:
            try:
                content = json.dumps(body, allow_nan=True).encode()
            except (ValueError, UnicodeEncodeError):
                return
            _accepted(
                client.post(
                    "/v1/batches", content=content, headers={"Content-Type": "application/json"}
                )
            )

        check()


def test_any_bytes_are_a_4xx_problem_or_202(gateway, keys):
    with gateway.client(keys["submitter"]) as client:

        @settings(max_examples=60, deadline=None, derandomize=True)
        @given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
        def check(content: bytes) -> None:
            _accepted(
                client.post(
                    "/v1/batches", content=content, headers={"Content-Type": "application/json"}
                )
            )

        check()
