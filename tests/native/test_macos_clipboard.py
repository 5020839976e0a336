"""The clipboard on the general NSPasteboard (deskrig.desktop.macos_clipboard) through the shared
clipboard rules, over a pasteboard stand-in holding UTI-named types as macOS does."""

from __future__ import annotations

import pytest

from deskrig.desktop.clipboard import TEXT_MIME, Clipboard
from deskrig.desktop.macos_clipboard import PasteboardSelections, mime_types
from deskrig.errors import DeskrigError, ErrorCode

from .recorded import MemoryPasteboard


def test_text_set_through_deskrig_is_the_pasteboards_utf8_text() -> None:
    board = MemoryPasteboard()
    clipboard = Clipboard(PasteboardSelections(board))

    clipboard.set("clipboard", "naïve 東京".encode())

    assert board.items == {"public.utf8-plain-text": "naïve 東京".encode()}
    got = clipboard.get("clipboard")
    assert (got.mime, got.data, got.available) == (TEXT_MIME, "naïve 東京".encode(), (TEXT_MIME,))


def test_what_another_app_copied_reads_by_mime_type() -> None:
    # What Safari puts on the pasteboard for a copied link (plus its private types).
    board = MemoryPasteboard(
        {
            "public.html": b"<a href='https://example.org'>x</a>",
            "public.utf8-plain-text": b"x",
            "com.apple.webarchive": b"bplist00...",
            "public.rtf": b"{\\rtf1 x}",
        }
    )
    clipboard = Clipboard(PasteboardSelections(board))

    html = clipboard.get("clipboard", "text/html")

    assert html.data == b"<a href='https://example.org'>x</a>"
    assert html.available == ("text/html", TEXT_MIME, "text/rtf")
    assert clipboard.get("clipboard").data == b"x"


def test_a_type_without_a_uti_is_kept_under_its_mime_name() -> None:
    board = MemoryPasteboard()
    clipboard = Clipboard(PasteboardSelections(board))

    clipboard.set("clipboard", b"{}", "application/json")

    assert board.items == {"application/json": b"{}"}
    assert clipboard.get("clipboard", "application/json").data == b"{}"


def test_macos_has_no_primary_selection() -> None:
    clipboard = Clipboard(PasteboardSelections(MemoryPasteboard({"public.utf8-plain-text": b"x"})))

    assert clipboard.get("primary").available == ()
    with pytest.raises(DeskrigError) as caught:
        clipboard.set("primary", b"x")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_uti_names_map_once_each_in_pasteboard_order() -> None:
    assert mime_types(["public.png", "public.tiff", "public.png", "com.apple.private"]) == [
        "image/png",
        "image/tiff",
    ]
