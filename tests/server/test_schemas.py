"""Every tool's input schema, as tools/list sends it, describes every property (clients show the
descriptions to people and models; a bare ``x`` says nothing about which x)."""

from __future__ import annotations

import pytest
from tests.server.helpers import undescribed

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
    missing = [path for tool in tools for path in undescribed(tool.input_model.model_json_schema(), tool.name)]
    assert missing == []
    assert all(tool.description for tool in tools)
