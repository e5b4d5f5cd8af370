import pytest
from pydantic import BaseModel

from runtime.errors import ConfigurationError
from runtime.registry.capabilities import Registry, ToolInput, tool
from runtime.tools.loading import load_tools
from runtime.types import Mode, Risk


class PathInput(ToolInput):
    path: str


class Loose(BaseModel):
    path: str


def test_decorator_records_the_spec_and_exports_its_schema():
    reg = Registry()

    @tool(risk=Risk.read, idempotent=True, timeout=5, schema_version="2", paths=["path"], into=reg)
    def peek(args: PathInput, ctx) -> str:
        """Look at a file."""
        return args.path

    spec = reg.get("peek")
    assert (spec.risk, spec.idempotent, spec.timeout, spec.schema_version) == (
        Risk.read,
        True,
        5,
        "2",
    )
    schema = reg.schemas()[0]
    assert schema["description"] == "Look at a file."
    assert schema["input_schema"]["required"] == ["path"]
    assert schema["input_schema"]["additionalProperties"] is False


def test_input_models_that_allow_extra_fields_are_tightened():
    reg = Registry()

    @tool(risk=Risk.read, into=reg)
    def loose(args: Loose, ctx) -> str:
        return ""

    assert reg.get("loose").input_model.model_config["extra"] == "forbid"


def test_plan_mode_disables_everything_but_reads():
    reg = Registry()

    @tool(risk=Risk.write, into=reg)
    def scribble(args: PathInput, ctx) -> str:
        return ""

    assert not reg.get("scribble").can_run(Mode.plan)
    assert reg.get("scribble").can_run(Mode.auto)


def test_closest_names_for_an_unknown_tool():
    reg = load_tools()
    assert "read_file" in reg.closest("read_fil")


def test_two_tools_with_one_name_is_a_startup_error():
    reg = Registry()

    @tool(name="dup", into=reg)
    def one(args: PathInput, ctx) -> str:
        return ""

    with pytest.raises(ConfigurationError):

        @tool(name="dup", into=reg)
        def two(args: PathInput, ctx) -> str:
            return ""


def test_a_tool_without_an_input_model_is_refused():
    with pytest.raises(ConfigurationError):

        @tool(into=Registry())
        def bare(args: dict, ctx) -> str:
            return ""


def test_tool_modules_load_by_name_and_a_missing_one_is_named():
    reg = load_tools(["tests.support.tools"])
    assert reg.get("bump") is not None
    with pytest.raises(ConfigurationError, match="no_such_module"):
        load_tools(["no_such_module"])


def test_builtin_tools_load_through_the_entry_point_group():
    from importlib.metadata import entry_points

    assert "runtime.tools" in [p.value for p in entry_points(group="toolrun.tools")]
