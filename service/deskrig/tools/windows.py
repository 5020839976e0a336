"""Window and application discovery, and window capture."""

from __future__ import annotations

import difflib
import functools
from collections import defaultdict

import anyio
from pydantic import BaseModel, Field

from deskrig.capture import CaptureOptions, CaptureTarget, ScreenshotMetadata
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import AppInfo, WindowInfo
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools.screen import NoArguments, capture

#: Below this difflib ratio a title is no match at all.
FUZZY_CUTOFF = 0.6


class ListWindowsInput(BaseModel):
    pid: int | None = Field(None, description="Only windows of this process")
    title: str | None = Field(None, description="Only windows whose title contains this (case-insensitive)")


class WindowList(BaseModel):
    windows: list[WindowInfo]


class AppList(BaseModel):
    apps: list[AppInfo]


class ScreenshotWindowInput(CaptureOptions):
    window_id: int | None = Field(None, description="Window id from list_windows")
    window_title: str | None = Field(
        None, description="Case-insensitive fuzzy title match; ambiguous matches are an error"
    )
    include_frame: bool = Field(False, description="Include the window manager's decoration")


def visible_windows(services: Services) -> list[WindowInfo]:
    """Blocking: the windows a client may see (blocked ones left out)."""
    return services.security.blocklist.filter(services.desktop.windows())


def title_score(query: str, title: str) -> float:
    """How well ``title`` matches ``query``: exact 3, prefix 2, substring 1, else fuzzy ratio (< 1)."""
    q, t = query.casefold().strip(), title.casefold().strip()
    if q == t:
        return 3.0
    if t.startswith(q):
        return 2.0
    if q in t:
        return 1.0
    ratio = difflib.SequenceMatcher(None, q, t).ratio()
    return ratio if ratio >= FUZZY_CUTOFF else 0.0


def resolve_window(windows: list[WindowInfo], window_id: int | None, title: str | None) -> WindowInfo:
    """Pick one window by id or by fuzzy title; WINDOW_NOT_FOUND or AMBIGUOUS_TARGET otherwise."""
    if window_id is None and not title:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "give window_id or window_title",
            details={"arguments": ["window_id", "window_title"]},
        )
    if window_id is not None:
        for window in windows:
            if window.id == window_id:
                return window
        raise DeskrigError(
            ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
        )
    assert title is not None
    scored = sorted(((title_score(title, w.title), w) for w in windows), key=lambda pair: -pair[0])
    scored = [(score, w) for score, w in scored if score > 0]
    if not scored:
        raise DeskrigError(
            ErrorCode.WINDOW_NOT_FOUND,
            f"no window title matches {title!r}",
            details={"window_title": title, "titles": [w.title for w in windows]},
        )
    best = [w for score, w in scored if score == scored[0][0]]
    if len(best) > 1:
        raise DeskrigError(
            ErrorCode.AMBIGUOUS_TARGET,
            f"{len(best)} windows match {title!r} equally well",
            details={
                "window_title": title,
                "candidates": [{"id": w.id, "title": w.title, "app": w.app, "pid": w.pid} for w in best],
            },
            remediation="Pass window_id of one of details.candidates, or a more specific title.",
        )
    return best[0]


def window_target(
    services: Services, window_id: int | None, title: str | None, include_frame: bool
) -> CaptureTarget:
    """Blocking: the capture target for one window; blocked windows are refused."""
    window = resolve_window(services.desktop.windows(), window_id, title)
    if services.security.blocklist.is_blocked(window.title):
        raise DeskrigError(
            ErrorCode.SECURITY_ERROR,
            "this window is blocked by the rig's security policy",
            details={"window_id": window.id},
        )
    region = window.frame_bounds if include_frame and window.frame_bounds else window.bounds
    return CaptureTarget(source="window", region=region, window=window, include_frame=include_frame)


async def list_windows(services: Services, call: CallInfo, args: ListWindowsInput) -> ToolResult:
    windows = await anyio.to_thread.run_sync(visible_windows, services)
    if args.pid is not None:
        windows = [w for w in windows if w.pid == args.pid]
    if args.title:
        needle = args.title.casefold()
        windows = [w for w in windows if needle in w.title.casefold()]
    return ToolResult(WindowList(windows=windows))


def apps_of(windows: list[WindowInfo]) -> list[AppInfo]:
    by_pid: dict[int | None, list[WindowInfo]] = defaultdict(list)
    for window in windows:
        by_pid[window.pid if window.pid is not None else -window.id].append(window)
    return [
        AppInfo(pid=pid if pid is not None and pid > 0 else None, name=ws[0].app, windows=[w.id for w in ws])
        for pid, ws in by_pid.items()
    ]


async def list_apps(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    windows = await anyio.to_thread.run_sync(visible_windows, services)
    return ToolResult(AppList(apps=apps_of(windows)))


async def screenshot_window(services: Services, call: CallInfo, args: ScreenshotWindowInput) -> ToolResult:
    target = functools.partial(window_target, services, args.window_id, args.window_title, args.include_frame)
    return await capture(services, call, target, args, screen_area=False)


TOOLS: list[AnyTool] = [
    ToolSpec(
        "list_windows",
        "List top-level windows (top-most first) with id, title, app, pid and client-area bounds in screen "
        "pixels. Filter by pid or by a title substring.",
        ListWindowsInput,
        WindowList,
        list_windows,
        title="List windows",
    ),
    ToolSpec(
        "list_apps",
        "List running applications that own windows, with their pids and window ids.",
        NoArguments,
        AppList,
        list_apps,
        title="List apps",
    ),
    ToolSpec(
        "screenshot_window",
        "Screenshot of one window's own contents (correct even when other windows cover it), by id or by "
        "fuzzy title.",
        ScreenshotWindowInput,
        ScreenshotMetadata,
        screenshot_window,
        captures=True,
        title="Screenshot a window",
    ),
]
