"""Clipboard tools: read and set the clipboard or the primary selection, as text or as any MIME type."""

from __future__ import annotations

import base64
import binascii

import anyio
from pydantic import BaseModel, Field, model_validator

from deskrig.desktop.clipboard import TEXT_MIME, ClipboardData, Selection, is_text
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionResult
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools.actions import ActionOptions, action_result
from deskrig.tools.input import resolve_keys

SELECTION = "clipboard (ctrl+c / ctrl+v) or primary (the current text selection, pasted by middle-click)"


class GetClipboardInput(BaseModel):
    selection: Selection = Field("clipboard", description=SELECTION)
    mime: str | None = Field(
        None,
        description="The type to read, one of the result's available types (e.g. text/html, image/png); "
        "default: the text",
    )


class ClipboardContent(BaseModel):
    selection: Selection = Field(description="Which selection was read")
    mime: str | None = Field(
        description="The type returned; null when the selection holds no text and no type was asked for"
    )
    size: int = Field(description="Bytes of content")
    text: str | None = Field(None, description="The content, for text (UTF-8) types")
    data: str | None = Field(
        None, description="The content, base64, for other types (or text that is not UTF-8)"
    )
    available: list[str] = Field(description="Every type the selection's owner offers; empty: nobody owns it")


class SetClipboardInput(ActionOptions):
    selection: Selection = Field("clipboard", description=SELECTION)
    text: str | None = Field(
        None, description="Text to put there (offered as UTF-8 text under every common name)"
    )
    data: str | None = Field(None, description="Or: base64 bytes to put there, with mime")
    mime: str | None = Field(
        None, description="The type of data (e.g. image/png), or of text (default text/plain;charset=utf-8)"
    )

    @model_validator(mode="after")
    def _text_or_data(self) -> SetClipboardInput:
        if (self.text is None) == (self.data is None):
            raise ValueError("give text, or data with mime")
        if self.data is not None and self.mime is None:
            raise ValueError("data needs its mime type")
        return self


def content_of(selection: Selection, read: ClipboardData) -> ClipboardContent:
    text: str | None = None
    if read.mime is not None and is_text(read.mime):
        try:
            text = read.data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    return ClipboardContent(
        selection=selection,
        mime=read.mime,
        size=len(read.data),
        text=text,
        data=base64.b64encode(read.data).decode("ascii") if text is None and read.mime is not None else None,
        available=list(read.available),
    )


async def get_clipboard(services: Services, call: CallInfo, args: GetClipboardInput) -> ToolResult:
    read = await anyio.to_thread.run_sync(services.desktop.clipboard.get, args.selection, args.mime)
    return ToolResult(content_of(args.selection, read))


def _payload(args: SetClipboardInput) -> tuple[bytes, str]:
    if args.text is not None:
        return args.text.encode("utf-8", "surrogatepass"), args.mime or TEXT_MIME
    assert args.data is not None and args.mime is not None
    try:
        return base64.b64decode(args.data, validate=True), args.mime
    except (binascii.Error, ValueError) as exc:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT, f"data is not base64: {exc}", details={"argument": "data"}
        ) from exc


async def set_clipboard(services: Services, call: CallInfo, args: SetClipboardInput) -> ToolResult:
    data, mime = _payload(args)
    clipboard = services.desktop.clipboard
    await anyio.to_thread.run_sync(clipboard.set, args.selection, data, mime)
    # Read back through the display server, as an app pasting would.
    offered = await anyio.to_thread.run_sync(clipboard.get, args.selection, mime)
    landed = offered.data == data
    evidence = [
        f"{args.selection} set to {len(data)} bytes of {mime}",
        "read back through the desktop: "
        + ("the same bytes" if landed else f"{len(offered.data)} other bytes"),
    ]
    return await action_result(services, call, args, "confirmed" if landed else "unverifiable", evidence)


TOOLS: list[AnyTool] = [
    ToolSpec(
        "get_clipboard",
        "Read the clipboard (or the primary selection): its text, or its content as one of the types "
        "its owner offers (listed in available).",
        GetClipboardInput,
        ClipboardContent,
        get_clipboard,
        title="Read the clipboard",
    ),
    ToolSpec(
        "set_clipboard",
        "Put text (or base64 data of a MIME type) on the clipboard or the primary selection, for the app "
        "to paste; the rig serves it until something else is copied.",
        SetClipboardInput,
        ActionResult,
        set_clipboard,
        read_only=False,
        resolve=resolve_keys,
        recorded=True,
        title="Set the clipboard",
    ),
]
