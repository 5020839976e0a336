"""The clipboard on every backend, against real apps: what set_clipboard puts there pastes into the
GTK form's entry, what the app copies reads back, 5 MB round-trips, and a type the owner does not
offer is refused with the ones it does."""

from __future__ import annotations

import pytest
from tests.polling import poll

from deskrig.desktop.clipboard import TEXT_MIME
from deskrig.errors import DeskrigError, ErrorCode

from .forms import Forms
from .helpers import focus_gtk_entry, send


def test_set_clipboard_then_ctrl_v_pastes_into_the_app(backend: Forms) -> None:
    """Into the GTK entry: an X client on X11, a native Wayland client on sway. (A rig's first
    paste, where v is new to sway's virtual keyboard, is tests/server/test_clipboard_rig.py's.)"""
    text = f"pasted on {backend.backend}: Grüße 東京"
    backend.desktop.clipboard.set("clipboard", text.encode())
    focus_gtk_entry(backend)  # and select its text, which the paste replaces
    send(backend, lambda d: d.press_key("ctrl+v"))
    backend.gtk.wait("entry", lambda e: e["text"] == text, "the pasted text in the GTK entry")


def test_text_copied_in_the_app_reads_back(backend: Forms) -> None:
    text = f"copied on {backend.backend}"
    focus_gtk_entry(backend)
    send(backend, lambda d: d.type_text(text))
    backend.gtk.wait("entry", lambda e: e["text"] == text)
    send(backend, lambda d: d.hotkey(["ctrl", "a"]))
    send(backend, lambda d: d.hotkey(["ctrl", "c"]))

    def copied() -> bool:
        read = backend.desktop.clipboard.get("clipboard")
        return read.data == text.encode() and read.mime == TEXT_MIME

    poll("the app's copy on the clipboard", copied)
    assert TEXT_MIME in backend.desktop.clipboard.get("clipboard").available


def test_five_megabytes_of_text_round_trip(backend: Forms) -> None:
    text = ("0123456789abcdef" * 65536 + "Ω\n") * 5  # 5 MiB and a bit, multi-byte characters included
    backend.desktop.clipboard.set("clipboard", text.encode())
    read = backend.desktop.clipboard.get("clipboard", "text/plain;charset=utf-8")
    assert len(read.data) == len(text.encode()) and read.data.decode() == text


def test_other_types_and_the_primary_selection(backend: Forms) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
    clipboard = backend.desktop.clipboard
    clipboard.set("primary", png, "image/png")
    read = clipboard.get("primary", "image/png")
    assert (read.mime, read.data) == ("image/png", png)
    empty = clipboard.get("primary")  # no text there: nothing, and what there is
    assert (empty.mime, empty.data, empty.available) == (None, b"", ("image/png",))

    with pytest.raises(DeskrigError) as caught:
        clipboard.get("primary", "text/html")
    assert caught.value.code == ErrorCode.UNSUPPORTED_FORMAT
    assert caught.value.details == {"mime": "text/html", "available": ["image/png"]}
    assert caught.value.remediation
    with pytest.raises(DeskrigError) as bad:
        clipboard.set("primary", b"x", "not a mime")
    assert bad.value.code == ErrorCode.INVALID_ARGUMENT
    assert clipboard.get("primary", "image/png").data == png, "a refused set changed the selection"
