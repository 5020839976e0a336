"""security: real directories and symlinks, a fake clock for the rate limiter, audit lines on disk."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from deskrig.config import SecurityPolicy
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.identity import ClientRef
from deskrig.model import Bounds, WindowInfo
from deskrig.security import AuditLog, PathGuard, RateLimiter, SecurityContext, WindowBlocklist

# --- PathGuard --------------------------------------------------------------------------------


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    root = tmp_path / "deskrig"
    root.mkdir()
    return root


def rejected(guard: PathGuard, path: str) -> DeskrigError:
    with pytest.raises(DeskrigError) as caught:
        guard.resolve(path)
    assert caught.value.code is ErrorCode.INVALID_PATH
    assert caught.value.details is not None
    assert caught.value.details["path"] == path
    assert caught.value.details["allowed_directories"] == guard.allowed_directories
    return caught.value


def test_paths_inside_the_allowed_directory_resolve(allowed: Path) -> None:
    guard = PathGuard([str(allowed)])
    assert guard.resolve(str(allowed)) == allowed
    assert guard.resolve(str(allowed / "shots" / "today")) == allowed / "shots" / "today"
    assert guard.resolve(f"{allowed}/a/../b") == allowed / "b"


def test_dot_dot_escape_is_rejected(allowed: Path) -> None:
    rejected(PathGuard([str(allowed)]), f"{allowed}/../elsewhere")


def test_symlink_pointing_outside_is_rejected(allowed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (allowed / "link").symlink_to(outside)
    error = rejected(PathGuard([str(allowed)]), str(allowed / "link" / "shots"))
    assert str(outside) in error.message


def test_symlink_staying_inside_is_accepted(allowed: Path) -> None:
    (allowed / "real").mkdir()
    (allowed / "alias").symlink_to(allowed / "real")
    assert PathGuard([str(allowed)]).resolve(str(allowed / "alias" / "x")) == allowed / "real" / "x"


def test_allowed_directory_given_through_a_symlink_still_matches(tmp_path: Path, allowed: Path) -> None:
    via_link = tmp_path / "shortcut"
    via_link.symlink_to(allowed)
    assert PathGuard([str(via_link)]).resolve(str(allowed / "x")) == allowed / "x"


def test_prefix_sibling_is_not_inside(allowed: Path) -> None:
    sibling = allowed.parent / "deskrig-evil"
    sibling.mkdir()
    rejected(PathGuard([str(allowed)]), str(sibling / "x.png"))


@pytest.mark.parametrize("path", ["shots", "./shots", "deskrig/../x", ""])
def test_relative_and_empty_paths_are_rejected(
    allowed: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(allowed)  # even when the relative path would land inside
    rejected(PathGuard([str(allowed)]), path)


def test_nul_byte_is_rejected(allowed: Path) -> None:
    rejected(PathGuard([str(allowed)]), f"{allowed}/a\0b")


def test_tilde_paths_expand_against_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    guard = PathGuard(["~/deskrig"])
    assert guard.resolve("~/deskrig/shots") == tmp_path / "deskrig" / "shots"
    rejected(guard, "~/other")


def test_missing_allowed_directory_is_created_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    guard = PathGuard(SecurityPolicy().allowed_directories)  # the default, ~/deskrig
    assert not (tmp_path / "deskrig").exists()
    assert guard.resolve("~/deskrig/a/b") == tmp_path / "deskrig" / "a" / "b"
    assert (tmp_path / "deskrig").is_dir()
    assert not (tmp_path / "deskrig" / "a").exists()  # only the allowed root is created


def test_rejected_path_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "never"
    rejected(PathGuard([str(root)]), str(tmp_path / "elsewhere"))
    assert not root.exists()


def test_no_allowed_directories_refuses_everything(tmp_path: Path) -> None:
    error = rejected(PathGuard([]), str(tmp_path))
    assert "no output directories" in error.message


def test_second_allowed_directory_is_honoured(tmp_path: Path, allowed: Path) -> None:
    other = tmp_path / "other"
    assert PathGuard([str(allowed), str(other)]).resolve(str(other / "f")) == other / "f"


# --- RateLimiter ------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


START = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def test_rate_limit_counts_per_client_in_a_sliding_minute() -> None:
    clock = FakeClock(START)
    limiter = RateLimiter(3, clock=clock)
    for step in range(3):
        clock.now = START + step * 10
        limiter.check("alice")
    limiter.check("bob")  # another client has its own window

    clock.now = START + 25
    with pytest.raises(DeskrigError) as caught:
        limiter.check("alice")
    error = caught.value
    assert error.code is ErrorCode.RATE_LIMIT_EXCEEDED
    assert error.details == {
        "limit": 3,
        "current": 3,
        "window_seconds": 60,
        "reset_at": "2023-11-14T22:14:20.000+00:00",  # the oldest call + 60 s
        "retry_after_seconds": 35,
    }

    clock.now = START + 60  # the oldest call leaves the window
    limiter.check("alice")
    with pytest.raises(DeskrigError) as caught:
        limiter.check("alice")
    assert caught.value.details is not None
    assert caught.value.details["reset_at"] == "2023-11-14T22:14:30.000+00:00"


def test_refused_calls_do_not_extend_the_lockout() -> None:
    clock = FakeClock(START)
    limiter = RateLimiter(1, clock=clock)
    limiter.check("c")
    for offset in (1, 20, 59):
        clock.now = START + offset
        with pytest.raises(DeskrigError):
            limiter.check("c")
    clock.now = START + 60
    limiter.check("c")


def test_rate_limiter_is_thread_safe() -> None:
    limiter = RateLimiter(50, clock=FakeClock(START))
    accepted: list[int] = []
    refused: list[int] = []
    barrier = threading.Barrier(8)

    def hammer() -> None:
        barrier.wait()
        for _ in range(20):
            try:
                limiter.check("shared")
                accepted.append(1)
            except DeskrigError:
                refused.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(accepted), len(refused)) == (50, 110)


# --- WindowBlocklist --------------------------------------------------------------------------


def window(wid: int, title: str) -> WindowInfo:
    return WindowInfo(id=wid, title=title, app="app", pid=None, bounds=Bounds(x=0, y=0, width=10, height=10))


def test_blocklist_matches_titles_case_insensitively_anywhere() -> None:
    blocklist = WindowBlocklist([r"password", r"^Bank\b"])
    assert blocklist.active
    assert blocklist.is_blocked("KeePass — PASSWORD database")
    assert blocklist.is_blocked("bank statements")
    assert not blocklist.is_blocked("Riverbank photos")
    windows = [window(1, "Terminal"), window(2, "Password manager"), window(3, "BANK")]
    assert [w.id for w in blocklist.filter(windows)] == [1]
    assert [w.id for w in blocklist.blocked(windows)] == [2, 3]


def test_empty_blocklist_blocks_nothing() -> None:
    blocklist = WindowBlocklist([])
    assert not blocklist.active
    assert blocklist.filter([window(1, "anything")]) == [window(1, "anything")]


def test_invalid_pattern_is_a_config_error() -> None:
    with pytest.raises(DeskrigError) as caught:
        WindowBlocklist(["(unclosed"])
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


# --- AuditLog ---------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_audit_log_writes_one_json_line_per_call_without_image_data(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(str(path))
    png_base64 = "iVBORw0KGgo" + "A" * 5000
    audit.record(
        ClientRef("alice", "s1"),
        "screenshot_screen",
        {"format": "png", "data": "abc", "nested": {"imageData": png_base64}, "blob": b"\x89PNG" * 10},
        "ok",
        duration_ms=12.34567,
    )
    # Each line is on disk as soon as it is recorded, before close.
    first = read_lines(path)
    assert len(first) == 1
    audit.record(
        ClientRef("client-2"), "click", {"x": 1, "y": 2, "text": "x" * 3000}, "error", "INVALID_REGION"
    )
    audit.close()

    entries = read_lines(path)
    assert [e["tool"] for e in entries] == ["screenshot_screen", "click"]
    shot, click = entries
    assert (shot["client"], shot["identity"], shot["session"]) == ("alice/s1", "alice", "s1")
    assert shot["outcome"] == "ok"
    assert shot["error_code"] is None
    assert shot["duration_ms"] == 12.346
    assert shot["arguments"] == {
        "format": "png",
        "data": "<omitted 3 bytes>",
        "nested": {"imageData": f"<omitted {len(png_base64)} bytes>"},
        "blob": "<omitted 40 bytes>",
    }
    assert isinstance(shot["time"], str) and shot["time"].endswith("+00:00")
    assert click["arguments"] == {"x": 1, "y": 2, "text": "<omitted 3000 bytes>"}
    assert (click["outcome"], click["error_code"], click["duration_ms"]) == ("error", "INVALID_REGION", None)
    assert "AAAA" not in path.read_text()


def test_audit_log_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text('{"earlier": true}\n')
    audit = AuditLog(str(path))
    audit.record(ClientRef("c"), "list_windows", {}, "ok")
    audit.close()
    assert read_lines(path)[0] == {"earlier": True}
    assert read_lines(path)[1]["tool"] == "list_windows"


@pytest.mark.parametrize("target", ["-", "stderr"])
def test_audit_log_to_stderr_never_touches_stdout(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    AuditLog(target).record(ClientRef("c"), "get_screen_size", {"png": "xyz"}, "ok")
    captured = capsys.readouterr()
    assert captured.out == ""
    entry = json.loads(captured.err)
    assert entry["tool"] == "get_screen_size"
    assert entry["arguments"] == {"png": "<omitted 3 bytes>"}


def test_disabled_audit_log_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    audit = AuditLog(None)
    assert not audit.enabled
    audit.record(ClientRef("c"), "click", {}, "ok")
    assert capsys.readouterr() == ("", "")


def test_audit_log_refuses_the_process_stdout(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    saved = os.dup(1)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        os.close(fd)
        with pytest.raises(DeskrigError) as caught:
            AuditLog(str(path))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_unopenable_audit_log_is_a_file_system_error(tmp_path: Path) -> None:
    with pytest.raises(DeskrigError) as caught:
        AuditLog(str(tmp_path / "missing" / "audit.jsonl"))
    assert caught.value.code is ErrorCode.FILE_SYSTEM_ERROR


# --- SecurityContext --------------------------------------------------------------------------


def test_context_is_built_from_the_policy(tmp_path: Path) -> None:
    policy = SecurityPolicy(
        allowed_directories=[str(tmp_path)],
        max_captures_per_minute=2,
        blocked_window_patterns=["secret"],
        audit_log=str(tmp_path / "audit.jsonl"),
    )
    context = SecurityContext.from_policy(policy, clock=FakeClock(START))
    try:
        assert context.paths.resolve(str(tmp_path / "x")) == tmp_path / "x"
        context.rate_limiter.check("c")
        context.rate_limiter.check("c")
        with pytest.raises(DeskrigError):
            context.rate_limiter.check("c")
        assert context.blocklist.is_blocked("Top Secret")
        context.audit.record(ClientRef("c"), "list_windows", {}, "ok")
    finally:
        context.close()
    assert read_lines(tmp_path / "audit.jsonl")[0]["tool"] == "list_windows"
