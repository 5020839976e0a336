"""The clipboard tools on a real rig of each backend, through a real MCP client, against the GTK
form (an X client on X11, a native Wayland client on sway): what set_clipboard puts there pastes
into its entry with ctrl+v, what the app copies get_clipboard reads, 5 MB round-trip, and bad
input gets its structured error and changes nothing.

Each backend's rig is fresh, as an agent meets it: on sway the paste is the virtual keyboard's
first use of v (the case a keymap GTK could not bind ctrl+v on failed, see sway_input.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.polling import poll
from tests.rigprocs import open_dir
from tests.server.rigproc import FormRig, start_form


@pytest.fixture(scope="module")
def gtk_form(backend: str) -> Iterator[FormRig]:
    # open_dir: a sway rig run as root runs the form as an unprivileged user, who writes its log.
    with open_dir(f"deskrig-{backend}-clipboard-") as tmp:
        form = start_form(
            tmp, "gtk_form", "Clipboard GTK", extra=["--backend", backend], window_relative=backend == "sway"
        )
        yield form
        form.rig.stop()


def test_set_clipboard_then_ctrl_v_pastes_into_the_gtk_entry(gtk_form: FormRig, backend: str) -> None:
    text = f"pasted on {backend}: Grüße 東京"
    gtk_form.ok("set_clipboard", {"text": text})
    x, y = gtk_form.widget_center("entry")
    gtk_form.ok("click", {"x": x, "y": y})
    gtk_form.ok("press_key", {"key": "ctrl+v"})
    gtk_form.wait_event("entry", lambda e: e["text"] == text)


def test_text_copied_in_the_app_reads_back(gtk_form: FormRig, backend: str) -> None:
    text = f"copied in the app on {backend}"
    x, y = gtk_form.widget_center("entry")
    gtk_form.ok("click", {"x": x, "y": y})
    gtk_form.ok("hotkey", {"keys": ["ctrl", "a"]})
    gtk_form.ok("type_text", {"text": text})  # replaces the selected text
    gtk_form.wait_event("entry", lambda e: e["text"] == text)
    gtk_form.ok("hotkey", {"keys": ["ctrl", "a"]})
    gtk_form.ok("hotkey", {"keys": ["ctrl", "c"]})
    read = poll(
        "the app's copy read back", lambda: (c := gtk_form.ok("get_clipboard", {}))["text"] == text and c
    )
    assert read["mime"] == "text/plain;charset=utf-8" and read["size"] == len(text.encode())


def test_five_megabytes_of_text_round_trip(gtk_form: FormRig) -> None:
    text = ("0123456789abcdef" * 65536 + "Ω\n") * 5  # 5 MiB and a bit, multi-byte characters included
    gtk_form.ok("set_clipboard", {"text": text})
    read = gtk_form.ok("get_clipboard", {})
    assert read["size"] == len(text.encode()) and read["text"] == text


def test_an_unknown_type_is_refused_and_a_refused_set_changes_nothing(gtk_form: FormRig) -> None:
    gtk_form.ok("set_clipboard", {"text": "kept"})
    unknown = gtk_form.error("get_clipboard", {"mime": "text/html"})
    assert unknown["code"] == "UNSUPPORTED_FORMAT" and unknown["remediation"]
    assert "text/plain;charset=utf-8" in unknown["details"]["available"]
    for bad in ({"text": "x", "mime": "not a mime"}, {"data": "!!!", "mime": "image/png"}, {"data": "AAAA"}):
        assert gtk_form.error("set_clipboard", bad)["code"] == "INVALID_ARGUMENT", bad
    assert gtk_form.ok("get_clipboard", {})["text"] == "kept", "a refused set changed the clipboard"
