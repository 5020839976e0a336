"""The ``acs`` compatibility profile: the screenshot tools of the older ACS screenshot server.

Agents written for that server use a rig unchanged: camelCase parameters and the
``{status, data | filePath, mimeType, metadata, error}`` response envelope. Every tool here is a
thin adapter over the default tools' building blocks.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from deskrig import imaging
from deskrig.capture import FORMAT_DESCRIPTION, QUALITY_DESCRIPTION, CaptureOptions, CaptureTarget
from deskrig.error_responses import acs_envelope
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import DisplayInfo, WindowInfo
from deskrig.privacy import masking_audit
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools.screen import NoArguments, RegionArguments, region_target, screen_target
from deskrig.tools.windows import visible_windows, window_target


class AcsCaptureInput(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    format: str | None = Field(
        None,
        description=FORMAT_DESCRIPTION + "; default: from savePath's extension, else png",
        json_schema_extra={"enum": list(imaging.SUPPORTED_FORMATS)},
    )
    quality: int | None = Field(None, ge=1, le=100, description=QUALITY_DESCRIPTION)
    savePath: str | None = Field(
        None,
        description="Save the image to this file instead of returning it, e.g. '/home/user/screenshots/"
        "desktop.png' (replaced if it exists). An existing directory, or a path ending in '/', gets a "
        "new dated file under it: YYYY-MM-DD/YYYYMMDD_HHMMSS_mmm.png. Must lie in an allowed directory",
    )
    enablePIIMasking: bool = Field(
        False,
        description="Mask e-mail addresses, phone numbers, card numbers, IBANs and custom patterns; "
        "metadata.piiMasking counts them. Always on when the rig's PII masking policy is on",
    )


class AcsFullInput(AcsCaptureInput):
    display: str | None = Field(
        None,
        description="Display id from screenshot_list_displays: 1 is the primary; 0 or absent: all displays",
    )


class AcsWindowInput(AcsCaptureInput):
    windowId: str | None = Field(
        None, description="Window id from screenshot_list_windows (decimal or 0x-hex)"
    )
    windowTitle: str | None = Field(
        None, description="Or a case-insensitive fuzzy title match; ambiguous matches are an error"
    )
    includeFrame: bool = Field(False, description="Include the window manager's decoration")


class AcsRegionInput(AcsCaptureInput, RegionArguments):
    pass


class AcsResponse(BaseModel):
    """The ACS envelope. ``data`` (base64) when not saved, ``filePath`` when saved; a failure's
    (``status: "error"`` and ``error``) is :func:`deskrig.error_responses.acs_envelope`'s."""

    status: str
    data: str | None = None
    filePath: str | None = None
    mimeType: str | None = None
    metadata: dict[str, Any] | None = None
    displays: list[DisplayInfo] | None = None
    windows: list[WindowInfo] | None = None
    error: dict[str, Any] | None = None


def _save_to(services: Services, args: AcsCaptureInput) -> tuple[CaptureOptions, Path | None]:
    """Blocking: the capture options and, when savePath names a file, that file (policy-checked)."""
    save_file = None
    save_dir = args.savePath
    if args.savePath is not None and not args.savePath.endswith(("/", os.sep)):
        path = services.security.paths.resolve(args.savePath)
        if not path.is_dir():
            save_file, save_dir = path, None
    fmt = args.format
    if fmt is None:
        # The server ACS agents were written for picks the format by the file's extension.
        extension = save_file.suffix.lstrip(".") if save_file is not None else ""
        fmt = imaging.normalize_format(extension) if extension else "png"
    options = CaptureOptions(
        format=fmt, quality=args.quality, save_dir=save_dir, mask_pii=args.enablePIIMasking
    )
    return options, save_file


async def _capture(services: Services, target: CaptureTarget, args: AcsCaptureInput) -> ToolResult:
    options, save_file = await anyio.to_thread.run_sync(_save_to, services, args)
    metadata, data = await anyio.to_thread.run_sync(services.capture.run, target, options, save_file)
    meta = metadata.model_dump(mode="json", exclude_none=True, exclude={"pii_masking"})
    meta["fileSize"] = metadata.saved_byte_size or metadata.byte_size
    if metadata.pii_masking is not None:
        meta["piiMasking"] = metadata.pii_masking.acs()
    if metadata.saved_path:
        response = AcsResponse(
            status="success", filePath=metadata.saved_path, mimeType=metadata.mime_type, metadata=meta
        )
    else:
        response = AcsResponse(
            status="success", data=base64.b64encode(data).decode(), mimeType=metadata.mime_type, metadata=meta
        )
    return ToolResult(response, audit=masking_audit(metadata.pii_masking))


def _int_id(name: str, value: str | None) -> int | None:
    """ACS passes ids as strings; accept decimal or 0x-hex."""
    if value is None or value == "":
        return None
    try:
        return int(value, 0)
    except ValueError:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT, f"{name} must be a number, got {value!r}", details={name: value}
        ) from None


async def capture_full(services: Services, call: CallInfo, args: AcsFullInput) -> ToolResult:
    display_id = _int_id("display", args.display)
    target = await anyio.to_thread.run_sync(screen_target, services, display_id)
    return await _capture(services, target, args)


async def capture_window(services: Services, call: CallInfo, args: AcsWindowInput) -> ToolResult:
    window_id = _int_id("windowId", args.windowId)
    target = await anyio.to_thread.run_sync(
        window_target, services, window_id, args.windowTitle, args.includeFrame
    )
    return await _capture(services, target, args)


async def capture_region(services: Services, call: CallInfo, args: AcsRegionInput) -> ToolResult:
    target = await anyio.to_thread.run_sync(region_target, services, args.x, args.y, args.width, args.height)
    return await _capture(services, target, args)


async def list_displays(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    displays = await anyio.to_thread.run_sync(services.desktop.displays)
    return ToolResult(AcsResponse(status="success", displays=displays))


async def list_windows(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    windows = await anyio.to_thread.run_sync(visible_windows, services)
    return ToolResult(AcsResponse(status="success", windows=windows))


def _acs(
    name: str, description: str, model: type[BaseModel], handler: Any, captures: bool, title: str
) -> AnyTool:
    return ToolSpec(
        name,
        description,
        model,
        AcsResponse,
        handler,
        captures=captures,
        title=title,
        profile="acs",
        error_output=acs_envelope,
        omit_none=True,
    )


TOOLS: list[AnyTool] = [
    _acs(
        "screenshot_capture_full",
        "Capture the full screen or one display (ACS compatible).",
        AcsFullInput,
        capture_full,
        True,
        "Capture the screen (ACS)",
    ),
    _acs(
        "screenshot_capture_window",
        "Capture one window by windowId or windowTitle (ACS compatible).",
        AcsWindowInput,
        capture_window,
        True,
        "Capture a window (ACS)",
    ),
    _acs(
        "screenshot_capture_region",
        "Capture a screen region (ACS compatible).",
        AcsRegionInput,
        capture_region,
        True,
        "Capture a region (ACS)",
    ),
    _acs(
        "screenshot_list_displays",
        "List displays (ACS compatible).",
        NoArguments,
        list_displays,
        False,
        "List displays (ACS)",
    ),
    _acs(
        "screenshot_list_windows",
        "List windows (ACS compatible).",
        NoArguments,
        list_windows,
        False,
        "List windows (ACS)",
    ),
]
