"""Every tool's input schema, as tools/list sends it, describes every property (clients show the
descriptions to people and models; a bare ``x`` says nothing about which x)."""

from __future__ import annotations

from typing import Any

import pytest

from deskrig.tools import tools_for_profile


def undescribed(schema: dict[str, Any], path: str) -> list[str]:
    """Paths of the properties without a description, in the schema and in its ``$defs``."""
    found = []
    for name, prop in (schema.get("properties") or {}).items():
        if not str(prop.get("description") or "").strip():
            found.append(f"{path}.{name}")
        found += undescribed(prop, f"{path}.{name}")
    for name, definition in (schema.get("$defs") or {}).items():
        found += undescribed(definition, f"{path}.$defs.{name}")
    for key in ("anyOf", "allOf", "oneOf"):
        for option in schema.get(key) or []:
            found += undescribed(option, path)
    if isinstance(schema.get("items"), dict):
        found += undescribed(schema["items"], f"{path}[]")
    return found


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
