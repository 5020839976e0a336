"""Every tool's input schema, as tools/list sends it, describes every property (clients show the
descriptions to people and models; a bare ``x`` says nothing about which x), carries no title
made from a property's name and gives an argument that defaults to None as the type it takes;
output schemas are shaped for fast validation and accept what pydantic's own would, and no
description promises a field is left out where results carry it as null."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from jsonschema.validators import validator_for
from mcp import Client
from pydantic import BaseModel, Field
from referencing import Registry
from tests.server.helpers import null_fields_described_as_absent, scripted_server, undescribed

from deskrig.a11y.tree import Element, ElementRef, ValueInfo
from deskrig.model import Bounds
from deskrig.server import DeskrigServer, InputJsonSchema, OutputJsonSchema, ToolJsonSchema, describe_tools
from deskrig.tools import tools_for_profile


def test_the_walk_finds_a_nested_property_without_a_description() -> None:
    schema = {
        "properties": {"a": {"description": "A", "anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]}},
        "$defs": {"T": {"properties": {"x": {"type": "integer"}, "y": {"description": "Y"}}}},
    }
    assert undescribed(schema, "t") == ["t.$defs.T.x"]


@pytest.mark.parametrize("profile", ["default", "acs"])
def test_every_input_property_has_a_description(profile: str) -> None:
    tools = tools_for_profile(profile)  # type: ignore[arg-type]
    assert tools
    missing = [
        path for tool in tools for path in undescribed(tool.input_model.model_json_schema(), tool.name)
    ]
    assert missing == []
    assert all(tool.description for tool in tools)


def _get_app_state() -> types.Tool:
    """get_app_state as tools/list shows it."""
    (tool,) = describe_tools([spec for spec in tools_for_profile("default") if spec.name == "get_app_state"])
    return tool


def _property_titles(schema: Any, path: str) -> list[str]:
    """Paths of the properties with a title of their own, anywhere in the schema: a property that
    is a model (inlined, with properties of its own) has the model's title, which names a type."""
    if isinstance(schema, list):
        return [found for item in schema for found in _property_titles(item, path)]
    if not isinstance(schema, dict):
        return []
    found = []
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            for name, prop in value.items():
                if isinstance(prop, dict) and "title" in prop and "properties" not in prop:
                    found.append(f"{path}.{name}")
                found += _property_titles(prop, f"{path}.{name}")
        else:
            found += _property_titles(value, f"{path}.{key}")
    return found


@pytest.mark.parametrize("profile", ["default", "acs"])
def test_no_tool_schema_titles_a_property_after_its_name(profile: str) -> None:
    """pydantic titles every property after its name ("Window Id"); tools/list leaves those out,
    in the input schemas (which go into an agent's context) and the output schemas."""
    tools = describe_tools(tools_for_profile(profile))  # type: ignore[arg-type]
    titled = [
        found
        for tool in tools
        for found in [
            *_property_titles(tool.input_schema, f"{tool.name}.input"),
            *_property_titles(tool.output_schema, f"{tool.name}.output"),
        ]
    ]
    assert titled == []


def test_a_models_title_stays_in_the_tool_schemas() -> None:
    """A model's title is its class name: it names the type for clients that generate code."""
    tool = _get_app_state()
    assert tool.output_schema is not None
    assert tool.output_schema["properties"]["elements"]["items"]["title"] == "Element"
    assert tool.input_schema["title"] == "GetAppStateInput"


class _Titled(BaseModel):
    plain_name: int = Field(description="Named only")
    chosen: int = Field(title="Chosen on purpose", description="Titled")


@pytest.mark.parametrize("generator", [ToolJsonSchema, OutputJsonSchema])
def test_a_title_set_on_purpose_stays(generator: type[ToolJsonSchema]) -> None:
    schema = _Titled.model_json_schema(mode="serialization", schema_generator=generator)
    assert schema["title"] == "_Titled"
    assert schema["properties"]["chosen"]["title"] == "Chosen on purpose"
    assert "title" not in schema["properties"]["plain_name"]


class _Arguments(BaseModel):
    maybe: int | None = Field(None, description="None when left out")
    limit: int | None = Field(5, description="None means no limit")
    either: int | None = Field(description="Required, may be None")


def test_an_argument_that_defaults_to_none_is_given_as_the_type_it_takes() -> None:
    schema = _Arguments.model_json_schema(schema_generator=InputJsonSchema)
    assert schema["properties"]["maybe"] == {"type": "integer", "description": "None when left out"}
    assert schema["properties"]["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert schema["properties"]["limit"]["default"] == 5
    assert schema["properties"]["either"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert schema["required"] == ["either"]
    assert _Arguments.model_validate({"maybe": None, "either": None}).maybe is None


@pytest.mark.parametrize("profile", ["default", "acs"])
def test_no_tool_asks_for_null_where_leaving_an_argument_out_says_the_same(profile: str) -> None:
    """Every argument that defaults to None is listed without null and without a default."""
    specs = tools_for_profile(profile)  # type: ignore[arg-type]
    offered = []
    for spec, tool in zip(specs, describe_tools(specs), strict=True):
        for name, field in spec.input_model.model_fields.items():
            prop = tool.input_schema["properties"][name]
            if field.default is None and ("default" in prop or "null" in json.dumps(prop)):
                offered.append(f"{tool.name}.{name}")
    assert offered == []


def test_an_argument_whose_null_means_more_than_its_default_keeps_null() -> None:
    """get_app_state's ``max_elements``: 2000 when left out, no limit when null."""
    tool = _get_app_state()
    max_elements = tool.input_schema["properties"]["max_elements"]
    assert {"type": "null"} in max_elements["anyOf"] and max_elements["default"] == 2000


class _Inner(BaseModel):
    x: int


class _Sample(BaseModel):
    count: int | None
    kind: Literal["a", "b"] | None = None
    inner: _Inner | None = None
    inners: list[_Inner] = []


class _Node(BaseModel):
    label: str | None = None
    children: list[_Node] = []


def _validator(schema: dict[str, Any]) -> Any:
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())


SAMPLES = [
    {"count": 1},
    {"count": None, "kind": None, "inner": None},
    {"count": 2, "kind": "a", "inner": {"x": 3}, "inners": [{"x": 1}, {"x": 2}]},
    {"count": "1"},
    {"count": 1, "kind": "c"},
    {"count": 1, "kind": 1},
    {"count": 1, "inner": {"x": None}},
    {"count": 1, "inner": {}},
    {"count": 1, "inners": [None]},
    {"kind": "a"},
]


def test_output_schemas_accept_what_pydantics_own_schema_accepts() -> None:
    """Inlined definitions and type lists change how fast a client validates, never what it accepts."""
    plain = _validator(_Sample.model_json_schema(mode="serialization"))
    shaped_schema = _Sample.model_json_schema(mode="serialization", schema_generator=OutputJsonSchema)
    shaped = _validator(shaped_schema)
    assert "$defs" not in shaped_schema and "$ref" not in json.dumps(shaped_schema)
    assert shaped_schema["properties"]["count"]["type"] == ["integer", "null"]
    assert "anyOf" in shaped_schema["properties"]["kind"], "an enum admits null only as its own branch"
    verdicts = [(plain.is_valid(doc), shaped.is_valid(doc)) for doc in SAMPLES]
    assert [p for p, _ in verdicts] == [s for _, s in verdicts]
    assert verdicts.count((True, True)) == 3


def test_a_recursive_output_model_keeps_its_definitions() -> None:
    schema = _Node.model_json_schema(mode="serialization", schema_generator=OutputJsonSchema)
    assert "$defs" in schema
    validator = _validator(schema)
    assert validator.is_valid({"label": None, "children": [{"children": [{"label": "leaf"}]}]})
    assert not validator.is_valid({"children": [{"label": 1}]})


def test_get_app_states_output_schema_has_no_references_or_unions() -> None:
    """A client validates each of the tree's elements without a $ref lookup or an anyOf branch."""
    tool = _get_app_state()
    schema = json.dumps(tool.output_schema)
    assert "$ref" not in schema and "anyOf" not in schema


def test_an_elements_json_leaves_out_empty_fields_and_reads_back_the_same() -> None:
    bare = Element(
        index=3, parent=1, depth=2, role="filler", name="", states=[], ref=ElementRef(":1.1", "/a")
    )
    assert bare.model_dump(mode="json") == {
        "index": 3,
        "parent": 1,
        "depth": 2,
        "role": "filler",
        "name": "",
        "states": [],
    }
    full = bare.model_copy(
        update={
            "text": "",  # an empty entry: its text is "", which says more than no text at all
            "actions": ("click",),
            "bounds": Bounds(x=1, y=2, width=3, height=4),
            "value": ValueInfo(current=0, minimum=0, maximum=1),
            "child_count": -1,
        }
    )
    dumped = full.model_dump(mode="json")
    assert dumped["text"] == "" and dumped["child_count"] == -1 and "description" not in dumped
    again = Element.model_validate({**dumped, "ref": full.ref})
    assert again == full


def test_a_field_a_result_carries_as_null_is_not_described_as_absent() -> None:
    """What a client reads in the output schema holds of the results: a screenshot's fields that
    have nothing to say are null, so no description of them may promise they are left out."""

    async def structured(server: DeskrigServer) -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(server.mcp) as client:  # type: ignore[arg-type]
            (tool,) = [tool for tool in (await client.list_tools()).tools if tool.name == "screenshot_screen"]
            result = await client.call_tool("screenshot_screen", {})
            assert not result.is_error and result.structured_content is not None, result
            assert tool.output_schema is not None
            return tool.output_schema, result.structured_content

    with scripted_server() as server:
        schema, content = anyio.run(structured, server)
    assert content["pii_masking"] is None
    assert null_fields_described_as_absent(schema, content) == []
