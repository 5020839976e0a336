"""PII masking end to end: every image and text a rig hands out, read back by the tests' own OCR.

The rig masks with libtesseract and the accessibility tree; the tests read its images with
tesseract's command-line program at other settings (tests/privacy/reading.py) and assert that no
secret can be read, that the unrelated text beside it still can, and that the counts are right.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
from tests.polling import poll
from tests.privacy.conftest import PiiRig
from tests.privacy.reading import leaked, pii, read_text, secrets_in

from deskrig.desktop import Desktop, open_desktop

#: Each secret shows twice (a widget and the canvas) but the phone and the IBAN (entries only).
EXPECTED_COUNTS = {"email": 2, "card": 2, pii.CUSTOM_NAME: 2, "phone": 1, "iban": 1}
#: Which engine finds them, by whether the toolkit has an accessibility tree: GTK's and Qt's widgets
#: are in theirs, their canvas is not; Tk has no tree at all.
EXPECTED_ENGINES = {True: {"tree": 5, "ocr": 3}, False: {"ocr": 8}}


def assert_masked(png: bytes, readable: list[str]) -> None:
    text = read_text(png)
    assert leaked(text) == [], text
    for word in readable:
        assert word in text, f"{word!r} should stay readable:\n{text}"


def assert_counts(report: dict[str, Any], has_tree: bool) -> None:
    assert report["counts"] == EXPECTED_COUNTS
    assert report["engines"] == EXPECTED_ENGINES[has_tree]


def _unmasked_desktop(pii_rig: PiiRig) -> Desktop:
    """The rig's desktop opened by the test itself: its pixels as they are, unmasked."""
    display = pii_rig.form.rig.display
    if pii_rig.backend == "sway":
        sockets = {"WAYLAND_DISPLAY": display, "SWAYSOCK": str(Path(display).parent / "sway-ipc.sock")}
        return open_desktop("sway", env=sockets)
    return open_desktop("x11", display)


def test_the_tests_reader_reads_every_secret_off_the_unmasked_screen(pii_rig: PiiRig) -> None:
    """Without this, "nothing leaked" could mean the reader reads nothing."""
    desktop = _unmasked_desktop(pii_rig)
    try:
        screen = desktop.grab(desktop.screen_bounds()).image()
    finally:
        desktop.close()
    png = Path(pii_rig.form.tmp or ".") / "unmasked.png"
    screen.save(png)
    assert sorted(leaked(read_text(png.read_bytes()))) == sorted(pii.SECRETS)


def test_a_screenshot_masks_every_secret_and_nothing_else(pii_rig: PiiRig) -> None:
    result = pii_rig.form.call("screenshot_screen", {})
    assert not result.is_error, result.structured_content
    assert_masked(base64.b64decode(result.content[0].data), pii_rig.readable)
    assert_counts(result.structured_content["pii_masking"], pii_rig.has_tree)


def test_a_saved_window_capture_is_masked(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    assert form.allowed is not None
    window = form.ok("list_windows", {"pid": form.pid})["windows"][0]
    metadata = form.ok("screenshot_window", {"window_id": window["id"], "save_dir": str(form.allowed)})
    assert_masked(Path(metadata["saved_path"]).read_bytes(), pii_rig.readable)
    assert_counts(metadata["pii_masking"], pii_rig.has_tree)


def test_the_acs_profile_masks_and_counts_like_the_server_it_replaces(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    assert form.allowed is not None
    path = form.allowed / "acs" / "full.png"
    response = form.ok("screenshot_capture_full", {"enablePIIMasking": True, "savePath": str(path)})
    assert response["filePath"] == str(path)
    assert_masked(path.read_bytes(), pii_rig.readable)
    masking = response["metadata"]["piiMasking"]
    assert masking["enabled"] is True
    assert (masking["emailsRedacted"], masking["phonesRedacted"], masking["creditCardsRedacted"]) == (2, 1, 2)
    assert (masking["ibansRedacted"], masking["customPatternsRedacted"]) == (1, 2)


def test_get_app_state_redacts_texts_and_counts(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    if not pii_rig.has_tree:
        # No tree to redact: the call says why rather than returning anything.
        assert form.error("get_app_state", {"pid": form.pid})["code"] == "A11Y_UNAVAILABLE"
        return
    state = form.ok("get_app_state", {"pid": form.pid, "include_elements": True})
    dumped = json.dumps(state)
    assert secrets_in(dumped) == [], state["text"]
    assert "Shipping notes" in state["text"]
    # Each widget once: the canvas is an image, with no text in the tree.
    assert state["pii_masking"]["counts"] == {
        "email": 1,
        "card": 1,
        pii.CUSTOM_NAME: 1,
        "phone": 1,
        "iban": 1,
    }


def _turns(record_dir: Path) -> list[Path]:
    return sorted(p for p in record_dir.glob("turn-*") if (p / "evidence.json").exists())


def test_a_recorded_click_is_masked_in_every_file_and_in_the_feed(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    before = len(_turns(pii_rig.record_dir))
    x, y = form.widget_center("button")
    form.ok("click", {"x": x, "y": y})
    turn = poll("the click's turn", lambda: _turns(pii_rig.record_dir)[before:] or None)[0]
    evidence = json.loads((turn / "evidence.json").read_text())
    for name in ("before.png", "after.png", "click.png"):
        assert evidence[name]["status"] == "captured", evidence[name]
        assert_masked((turn / name).read_bytes(), pii_rig.readable)
        assert_counts(evidence[name]["pii_masking"], pii_rig.has_tree)
    for name in ("action.json", "before_state.json", "after_state.json"):
        if (turn / name).exists():
            assert leaked((turn / name).read_text()) == [], name
    if pii_rig.has_tree:
        assert evidence["after_state.json"]["pii_masking"]["counts"]["email"] == 1
    # The feed hands out the same (masked) files.
    for name in ("before.png", "after.png", "click.png", "action.json", "after_state.json"):
        if not (turn / name).exists():
            continue
        served = httpx.get(
            f"{form.rig.base}/recording/files/{turn.name}/{name}", headers=form.rig.auth, timeout=30
        )
        assert served.status_code == 200, name
        assert served.content == (turn / name).read_bytes(), name


def test_the_audit_log_counts_what_was_masked_never_the_text(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    form.ok("type_text", {"text": f"call {pii.PHONE}"})
    form.ok("screenshot_region", {"x": 0, "y": 0, "width": 400, "height": 300})
    lines = [json.loads(line) for line in pii_rig.audit_log.read_text().splitlines()]
    assert secrets_in(pii_rig.audit_log.read_text()) == []
    region = [line for line in lines if line["tool"] == "screenshot_region"][-1]
    assert region["pii_masking"]["counts"], region
    typed = [line for line in lines if line["tool"] == "type_text"][-1]
    assert typed["arguments"]["text"] == "call [redacted:phone]"


def test_video_is_refused_while_masking_is_on(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    assert form.allowed is not None
    error = form.error("start_recording", {"output_dir": str(form.allowed / "video"), "record_video": True})
    assert error["code"] == "RECORDING_ERROR", error
    assert "PII masking" in error["message"]


def test_queries_match_what_the_client_sees_so_they_cannot_probe_for_a_secret(pii_rig: PiiRig) -> None:
    """get_app_state's filter, wait_for and an element target match the redacted names: asking for
    a masked string finds nothing, whether or not the app shows it."""
    form = pii_rig.form
    if not pii_rig.has_tree:
        # No tree: no query about its texts is answered at all.
        assert form.error("get_app_state", {"pid": form.pid, "name": "Mail"})["code"] == "A11Y_UNAVAILABLE"
        return
    pid = form.pid
    assert (
        form.ok("get_app_state", {"pid": pid, "name": pii.EMAIL, "include_elements": True})["elements"] == []
    )
    found = form.ok("get_app_state", {"pid": pid, "name": "[redacted:email]", "include_elements": True})
    assert [e["name"] for e in found["elements"]] == ["Mail [redacted:email]"]
    assert found["pii_masking"]["counts"] == {"email": 1}
    missing = form.error("wait_for", {"pid": pid, "name": pii.EMAIL, "timeout_ms": 300})
    assert missing["code"] == "TIMEOUT", missing
    waited = form.ok("wait_for", {"pid": pid, "name": "Mail [redacted:email]", "timeout_ms": 10_000})
    assert waited["element"]["name"] == "Mail [redacted:email]"
    refused = form.error("click", {"element": {"pid": pid, "name": pii.CARD}})
    assert refused["code"] == "ELEMENT_NOT_FOUND", refused


def test_an_action_result_is_redacted_like_everything_else_that_leaves_the_rig(pii_rig: PiiRig) -> None:
    form = pii_rig.form
    if not pii_rig.has_tree:
        assert form.error("get_app_state", {"pid": form.pid})["code"] == "A11Y_UNAVAILABLE"
        return
    state = form.ok("get_app_state", {"pid": form.pid, "role": "text", "include_elements": True})
    (entry,) = [e for e in state["elements"] if "[redacted:phone]" in (e.get("text") or "")]
    phone_text = dict(pii.ENTRIES)["phone_entry"]
    element = {"snapshot_id": state["snapshot_id"], "index": entry["index"]}
    # The text it already shows: set again, read back (and reported) with the number in it.
    result = form.ok("set_value", {"element": element, "value": phone_text})
    assert result["effect"] == "confirmed", result
    dumped = json.dumps(result)
    assert secrets_in(dumped) == [], dumped
    assert "Call [redacted:phone] today" in dumped


def test_a_changed_screen_is_searched_again(pii_rig: PiiRig) -> None:
    """The masker reuses an unchanged screen's boxes without looking at its pixels (the damage
    serial vouches for them): a secret typed since must be found and masked in the next captures.
    Typed past the entry's end, it scrolls the entry: in GTK its character extents move without its
    bounds changing; in Tk its text runs into the entry's border and focus ring, which OCR must
    see past. Last in the module: it leaves the entry changed."""
    form = pii_rig.form
    before = form.ok("screenshot_screen", {})["pii_masking"]["counts"].get("email", 0)
    x, y = form.widget_center("iban_entry")
    form.ok("click", {"x": x, "y": y})
    form.ok("press_key", {"key": "End"})
    # Past the entry's end: it scrolls, and in Tk the address meets its border and focus ring.
    typed = form.ok("type_text", {"text": f" and for every invoice please mail {pii.EMAIL}"})
    assert not pii_rig.has_tree or typed["effect"] == "confirmed", typed

    def masked_with_the_new_address() -> Any:
        result = form.call("screenshot_screen", {})
        assert not result.is_error, result.structured_content
        counts = result.structured_content["pii_masking"]["counts"]
        return result if counts.get("email", 0) > before else None

    result = poll("a capture that finds the typed address", masked_with_the_new_address, timeout=60)
    for capture in (result, form.call("screenshot_screen", {})):
        # Only what is not selected (an entry's selection is white on blue) is read for sure.
        text = read_text(base64.b64decode(capture.content[0].data))
        assert leaked(text) == [], text
        assert "Quarterly" in text and "Shipping" in text, text
