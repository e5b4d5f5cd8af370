import pytest
from pydantic import Field

from runtime.registry.capabilities import ToolInput
from runtime.registry.validation import Invalid, validate


class ReadInput(ToolInput):
    path: str
    limit: int = Field(100, ge=1)


def test_valid_arguments_become_a_typed_input():
    assert validate(ReadInput, {"path": "a", "limit": 3}) == ReadInput(path="a", limit=3)


def test_a_json_string_of_an_object_is_accepted():
    assert validate(ReadInput, '{"path": "a"}') == ReadInput(path="a")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": None}, "path: must be a string (got null)"),
        ({}, "path: is required"),
        ({"path": 3}, "path: must be a string (got a number)"),
        ({"path": "a", "mode": "x"}, "mode: is not a known field"),
        ({"path": "a", "limit": "many"}, "limit: must be an integer (got a string)"),
        ([1, 2], "arguments must be a JSON object; got a list"),
        ("not json", "arguments must be a JSON object"),
        (7, "arguments must be a JSON object; got a number"),
    ],
)
def test_every_bad_shape_is_named_for_the_model(arguments, expected):
    result = validate(ReadInput, arguments)
    assert isinstance(result, Invalid)
    assert expected in result.message
    assert len(result.message) <= 600


def test_every_bad_field_is_named_at_once():
    result = validate(ReadInput, {"path": None, "limit": 0, "extra": 1})
    assert isinstance(result, Invalid)
    assert result.fields == ["path", "limit", "extra"]
    assert "Expected fields: path (string), limit (integer, optional)" in result.message


@pytest.mark.parametrize("arguments", ["", "  ", None])
def test_empty_arguments_are_an_empty_object(arguments):
    """Providers send `arguments: ""` for a tool without parameters."""

    class NoParameters(ToolInput):
        pass

    assert validate(NoParameters, arguments) == NoParameters()
    assert isinstance(validate(ReadInput, arguments), Invalid)  # and required fields still count


def test_nested_fields_are_named_by_their_path_as_spelled():
    class Edit(ToolInput):
        oldText: str
        newText: str

    class EditInput(ToolInput):
        edits: list[Edit]

    result = validate(EditInput, {"edits": [{"oldText": "a", "newText": "b"}, {"oldText": "a"}]})
    assert isinstance(result, Invalid)
    assert result.fields == ["edits[1].newText"]
    assert result.message.startswith("edits[1].newText: is required")
