"""Helpers shared by the server tests: calling a tool on a rig and reading what it answered
(images, pixels, structured errors), and checking tool schemas."""

from __future__ import annotations

import base64
import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image
from tests.server.conftest import GreenRig

from deskrig.config import Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import tool_error
from deskrig.server import DeskrigServer
from deskrig.serving import build_server


@contextlib.contextmanager
def scripted_server() -> Iterator[DeskrigServer]:
    """A server over the scripted desktop with default settings, closed after."""
    server = build_server(ScriptedDesktop().open(), Settings())
    try:
        yield server
    finally:
        server.services.desktop.close()
        server.services.security.close()


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def close_to(pixel: tuple[int, ...], expected: tuple[int, int, int], tolerance: int = 6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], expected, strict=True))


def image_of(result: Any) -> Image.Image:
    (block,) = [c for c in result.content if c.type == "image"]
    return Image.open(io.BytesIO(base64.b64decode(block.data))).convert("RGB")


def error_of(result: Any) -> dict[str, Any]:
    error = tool_error(result)
    assert error is not None, result
    assert result.structured_content is None  # it would not match the output schema
    assert error["remediation"]
    return error


def allowed(rig: GreenRig) -> Path:
    """The folder the rig's file tools may read and write."""
    return rig.tmp / "home" / "deskrig"


def ok(rig: GreenRig, tool: str, arguments: dict[str, Any]) -> Any:
    """The result of calling ``tool``, which must have succeeded."""
    result = rig.rig.call(tool, arguments)
    assert not result.is_error, result.content
    return result


def null_fields_described_as_absent(output_schema: dict[str, Any], content: dict[str, Any]) -> list[str]:
    """The fields ``content`` (a tool's structured result) carries as null whose description in the
    tool's output schema says they are left out."""
    properties = output_schema["properties"]
    return sorted(
        name
        for name, value in content.items()
        if value is None and "absent" in properties[name].get("description", "").lower()
    )


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
