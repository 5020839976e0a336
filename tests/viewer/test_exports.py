"""``deskrig view --zip`` and ``deskrig export --jsonl`` of a real recording, and their bad input."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from tests.viewer.conftest import RecordedSession, deskrig


def test_jsonl_has_one_line_per_turn_with_its_images_and_a11y_diff(
    recorded: RecordedSession, tmp_path: Path
) -> None:
    out = tmp_path / "turns.jsonl"
    done = deskrig("export", str(recorded.folder), "--jsonl", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert [line["turn"] for line in lines] == [1, 2, 3, 4]
    second = lines[1]
    assert second["tool"] == "click" and second["arguments"].keys() == {"x", "y"}
    assert second["timestamp"].endswith("Z") and second["effect"] == second["result"]["effect"]
    assert (
        second["before_image"] == "turn-00002/before.png" and second["after_image"] == "turn-00002/after.png"
    )
    assert {"kind": "renamed", "role": "label", "before": "clicked 0", "after": "clicked 1"}.items() <= next(
        change for change in second["a11y_diff"] if change["kind"] == "renamed"
    ).items()
    assert lines[3]["is_error"] and lines[3]["error"]["code"] == "ELEMENT_NOT_FOUND"
    assert lines[3]["before_image"] is None and lines[3]["a11y_diff"] == []


def test_the_zip_holds_a_report_that_opens_with_its_images(
    recorded: RecordedSession, tmp_path: Path, browser_page: Page
) -> None:
    archive = tmp_path / "share.zip"
    done = deskrig("view", str(recorded.folder), "--zip", str(archive))
    assert done.returncode == 0, done.stderr
    assert not (recorded.folder / "report.html").exists()  # --zip alone writes only the zip
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        assert {"report.html", "files/recording.mp4", "files/turn-00002/before.png"} <= names
        opened.extractall(tmp_path / "unzipped")
    browser_page.goto((tmp_path / "unzipped" / "report.html").as_uri())
    expect(browser_page.locator("#turns .turn")).to_have_count(4)
    expect(browser_page.locator(".shot.before img")).to_have_js_property("complete", True)
    assert browser_page.locator(".shot.before img").evaluate("img => img.naturalWidth") > 0


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["view", "{missing}"], "INVALID_PATH", "is not a recording folder: no such folder"),
        (["view", "{empty}"], "INVALID_PATH", "holds no turn folders"),
        (["export", "{recording}", "--jsonl", "{missing}/out.jsonl"], "FILE_SYSTEM_ERROR", "cannot write"),
        (["view", "{recording}", "--zip", "{missing}/out.zip"], "FILE_SYSTEM_ERROR", "cannot write"),
    ],
)
def test_bad_input_is_one_clear_line_and_writes_nothing(
    recorded: RecordedSession, tmp_path: Path, args: list[str], code: str, said: str
) -> None:
    (tmp_path / "empty").mkdir()
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "recording": recorded.folder}
    done = deskrig(*(arg.format(**paths) for arg in args))
    assert done.returncode == 1 and not done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"deskrig: {code}: ") and said in line, line
    assert not (tmp_path / "missing").exists() and not list((tmp_path / "empty").iterdir())
