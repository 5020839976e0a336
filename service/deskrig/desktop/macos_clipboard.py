"""The macOS clipboard (the general NSPasteboard) as a :class:`~deskrig.desktop.clipboard.SelectionStore`.

The pasteboard names types by Uniform Type Identifier ("public.utf8-plain-text"), deskrig by MIME
type: the common ones are translated both ways; any other MIME type is stored under its own name,
which the pasteboard accepts as a type, so what deskrig puts there it reads back. macOS has no
primary selection: it is always empty, and setting it is INVALID_ARGUMENT.

The :class:`Pasteboard` itself is ``macos_quartz.GeneralPasteboard`` (AppKit); the translation
here is tested on Linux.
"""

from __future__ import annotations

from typing import Protocol

from deskrig.desktop.clipboard import TEXT_MIME, Selection, is_text
from deskrig.errors import DeskrigError, ErrorCode

#: MIME type -> the pasteboard's type for it.
UTI_OF_MIME: dict[str, str] = {
    TEXT_MIME: "public.utf8-plain-text",
    "text/html": "public.html",
    "text/rtf": "public.rtf",
    "application/rtf": "public.rtf",
    "image/png": "public.png",
    "image/tiff": "public.tiff",
    "application/pdf": "com.adobe.pdf",
    "text/uri-list": "public.file-url",
}
#: The pasteboard's type -> the MIME type deskrig reports (the first MIME type naming it above).
MIME_OF_UTI: dict[str, str] = {}
for _mime, _uti in UTI_OF_MIME.items():
    MIME_OF_UTI.setdefault(_uti, _mime)


class Pasteboard(Protocol):
    """The general pasteboard: its types, one type's bytes, replacing its contents."""

    def types(self) -> list[str]: ...

    def data(self, pasteboard_type: str) -> bytes | None: ...

    def replace(self, items: dict[str, bytes]) -> None:
        """Clear the pasteboard and put ``items`` (type -> bytes) on it as one item."""
        ...


def mime_types(pasteboard_types: list[str]) -> list[str]:
    """The pasteboard's types as deskrig reports them: known UTIs as MIME types, MIME-named types as
    they are, others (app-private UTIs) left out; each once, in the pasteboard's order."""
    found: list[str] = []
    for name in pasteboard_types:
        mime = MIME_OF_UTI.get(name, name if "/" in name else None)
        if mime is not None and mime not in found:
            found.append(mime)
    return found


def pasteboard_type(mime: str) -> str:
    """Where a MIME type lives on the pasteboard (text under any of its names: UTF-8 text)."""
    if is_text(mime):
        return UTI_OF_MIME[TEXT_MIME]
    return UTI_OF_MIME.get(mime, mime)


class PasteboardSelections:
    """The clipboard on the general pasteboard; no primary selection."""

    def __init__(self, pasteboard: Pasteboard) -> None:
        self._pasteboard = pasteboard

    def types(self, selection: Selection) -> list[str]:
        if selection != "clipboard":
            return []
        return mime_types(self._pasteboard.types())

    def fetch(self, selection: Selection, mime: str) -> bytes:
        return self._pasteboard.data(pasteboard_type(mime)) or b""

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        if selection != "clipboard":
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                "macOS has no primary selection",
                details={"selection": selection},
                remediation="Use the clipboard selection.",
            )
        self._pasteboard.replace({pasteboard_type(mime): data for mime in types})

    def close(self) -> None:
        """Nothing to release: what was put on the pasteboard stays there, as after a copy."""
