"""What the dialects share: a provider response's `usage` read as the model's tokens."""

from __future__ import annotations

import pytest

from runtime import adapters
from runtime.adapters.common import model_usage

CALL = {"type": "tool_use", "id": "t1", "name": "echo", "input": {"text": "x"}}


@pytest.mark.parametrize(
    ("response", "tokens"),
    [
        (  # Anthropic Messages
            {
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [CALL],
                "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 5},
            },
            ("claude-x", 10, 3),
        ),
        (  # OpenAI Chat Completions
            {
                "object": "chat.completion",
                "model": "gpt-x",
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "echo", "arguments": '{"text": "x"}'},
                                }
                            ],
                        }
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
            },
            ("gpt-x", 20, 4),
        ),
        (  # OpenAI Responses
            {
                "object": "response",
                "model": "gpt-y",
                "output": [
                    {
                        "type": "function_call",
                        "call_id": "c1",
                        "name": "echo",
                        "arguments": '{"text": "x"}',
                    }
                ],
                "usage": {"input_tokens": 30, "output_tokens": 6, "total_tokens": 36},
            },
            ("gpt-y", 30, 6),
        ),
    ],
)
def test_a_whole_response_carries_its_models_tokens_into_the_turn(response, tokens):
    turn = adapters.parse(response)
    assert len(turn.calls) == 1
    assert (turn.usage["model"], turn.usage["input_tokens"], turn.usage["output_tokens"]) == tokens


def test_a_bare_message_or_odd_usage_carries_none():
    assert adapters.parse([CALL]).usage is None
    assert model_usage({"usage": "lots"}) is None
    odd = model_usage({"usage": {"input_tokens": True, "output_tokens": "7"}, "model": 3})
    assert odd == {"model": None, "input_tokens": None, "output_tokens": None}
