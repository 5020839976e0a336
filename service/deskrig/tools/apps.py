"""App control and waiting: ``launch_app``, ``kill_app``, ``focus_window``, ``wait_for``."""

from __future__ import annotations

import signal
import time

import anyio
from PIL import Image, ImageChops
from pydantic import BaseModel, Field, field_validator, model_validator

from deskrig.a11y import ElementQuery
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.launcher import process_alive, terminate
from deskrig.model import ActionResult, ActionTarget, Bounds, CText, EnvName, WindowInfo
from deskrig.procs import KILL_SIGNAL
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools.actions import poll_until
from deskrig.tools.targets import a11y_of, summarize
from deskrig.tools.windows import resolve_window

MAX_WAIT_MS = 30_000
KILL_GRACE_S = 3.0
POLL_S = 0.05


class LaunchAppInput(BaseModel):
    command: list[CText] = Field(min_length=1, description="argv, e.g. ['gtk3-widget-factory']")
    env: dict[EnvName, CText] = Field(default_factory=dict, description="Extra environment variables")
    cwd: CText | None = Field(None, description="Working directory (default: the rig's)")
    wait_for_window: bool = Field(True, description="Return once a window of the app is mapped")
    timeout_ms: int = Field(10_000, ge=100, le=MAX_WAIT_MS, description="How long to wait for its window")

    @field_validator("command")
    @classmethod
    def _program_named(cls, command: list[str]) -> list[str]:
        if not command[0]:
            raise ValueError("the program name (command[0]) is empty")
        return command


class LaunchResult(BaseModel):
    pid: int
    window: WindowInfo | None = None


class KillAppInput(BaseModel):
    pid: int = Field(gt=0, description="Process id of the app (see list_apps or launch_app)")
    force: bool = Field(False, description="SIGKILL at once instead of SIGTERM with a grace period")


class KillResult(BaseModel):
    pid: int
    exited: bool
    signal: str
    exit_status: int | None = None


class FocusWindowInput(BaseModel):
    window_id: int = Field(description="Window id from list_windows")


class RegionCondition(BaseModel):
    x: int = Field(description="Left edge in screen pixels")
    y: int = Field(description="Top edge in screen pixels")
    width: int = Field(gt=0, description="Width in screen pixels")
    height: int = Field(gt=0, description="Height in screen pixels")
    condition: str = Field(
        "changed",
        json_schema_extra={"enum": ["changed", "stable"]},
        description="changed: any pixel differs from when the wait began; stable: nothing changes for stable_ms",
    )
    stable_ms: int = Field(500, ge=50, le=MAX_WAIT_MS, description="For stable: how long nothing may change")


class WaitForInput(BaseModel):
    window_title: str | None = Field(None, description="Until a window whose title contains this appears")
    role: str | None = Field(None, description="Until an element with this role (and name) exists")
    name: str | None = Field(None, description="Until an element with this name (and role) exists")
    pid: int | None = Field(None, description="The app to search for the element (default: any window's app)")
    region: RegionCondition | None = Field(None, description="Until a screen region changes or is stable")
    timeout_ms: int = Field(5_000, ge=0, le=MAX_WAIT_MS, description="Give up (TIMEOUT) after this long")

    @model_validator(mode="after")
    def _one_condition(self) -> WaitForInput:
        given = [
            self.window_title is not None,
            self.role is not None or self.name is not None,
            self.region is not None,
        ]
        if sum(given) != 1:
            raise ValueError("give exactly one of: window_title, role/name, region")
        return self


class WaitResult(BaseModel):
    elapsed_ms: float
    window: WindowInfo | None = None
    element: dict[str, object] | None = None
    region: Bounds | None = None


def _new_window_of(services: Services, pid: int) -> WindowInfo | None:
    return next((w for w in services.desktop.windows() if w.pid == pid and not w.minimized), None)


async def launch_app(services: Services, call: CallInfo, args: LaunchAppInput) -> ToolResult:
    pid = await anyio.to_thread.run_sync(services.launcher.launch, args.command, args.env, args.cwd)
    if not args.wait_for_window:
        return ToolResult(LaunchResult(pid=pid))
    found: list[WindowInfo] = []

    async def mapped() -> bool:
        if services.launcher.exit_status(pid) is not None:
            raise DeskrigError(
                ErrorCode.APP_NOT_RUNNING,
                f"{args.command[0]} exited with status {services.launcher.exit_status(pid)} before showing a window",
                details={"pid": pid, "exit_status": services.launcher.exit_status(pid)},
            )
        window = await anyio.to_thread.run_sync(_new_window_of, services, pid)
        found[:] = [window] if window else []
        return window is not None

    if not await poll_until(mapped, args.timeout_ms / 1000):
        raise DeskrigError(
            ErrorCode.TIMEOUT,
            f"{args.command[0]} (pid {pid}) showed no window within {args.timeout_ms} ms",
            details={
                "pid": pid,
                "timeout_ms": args.timeout_ms,
                "observed": "process running, no window with its pid",
            },
        )
    return ToolResult(LaunchResult(pid=pid, window=found[0]))


async def kill_app(services: Services, call: CallInfo, args: KillAppInput) -> ToolResult:
    windows = await anyio.to_thread.run_sync(services.desktop.windows)
    ours = services.launcher.launched(args.pid) or any(w.pid == args.pid for w in windows)
    if not process_alive(args.pid):
        raise DeskrigError(
            ErrorCode.APP_NOT_RUNNING, f"no running process {args.pid}", details={"pid": args.pid}
        )
    if not ours:
        raise DeskrigError(
            ErrorCode.PERMISSION_DENIED,
            f"process {args.pid} is not an app on this desktop",
            details={"pid": args.pid},
            remediation="kill_app stops apps that own a window here or were started with launch_app.",
        )
    sig = KILL_SIGNAL if args.force else signal.SIGTERM
    terminate(args.pid, sig)

    async def gone() -> bool:
        return services.launcher.exit_status(args.pid) is not None or not process_alive(args.pid)

    exited = await poll_until(gone, KILL_GRACE_S)
    if not exited and not args.force:
        terminate(args.pid, KILL_SIGNAL)
        sig = KILL_SIGNAL
        exited = await poll_until(gone, KILL_GRACE_S)
    result = KillResult(
        pid=args.pid, exited=exited, signal=sig.name, exit_status=services.launcher.exit_status(args.pid)
    )
    return ToolResult(result)


async def focus_window(services: Services, call: CallInfo, args: FocusWindowInput) -> ToolResult:
    windows = await anyio.to_thread.run_sync(services.desktop.windows)
    window = resolve_window(services.security.blocklist.filter(windows), args.window_id, None)
    await anyio.to_thread.run_sync(services.desktop.activate_window, window.id)

    async def focused() -> bool:
        now = await anyio.to_thread.run_sync(services.desktop.windows)
        return any(w.id == window.id and w.focused for w in now)

    ok = await poll_until(focused, 2.0)
    target = ActionTarget(pid=window.pid, window_id=window.id, window_title=window.title)
    evidence = [
        "asked the window manager to activate the window",
        f"read back: window is {'' if ok else 'NOT '}focused",
    ]
    return ToolResult(
        ActionResult(effect="confirmed" if ok else "unverifiable", target=target, evidence=evidence)
    )


async def _wait_window(services: Services, title: str) -> WindowInfo | None:
    windows = await anyio.to_thread.run_sync(services.desktop.windows)
    needle = title.casefold()
    # Under PII masking a title is matched as list_windows shows it (redacted): a wait for a
    # secret in a title never tells whether it is there.
    masker = services.observer.masker if services.observer.masks() else None
    return next(
        (
            w
            for w in services.security.blocklist.filter(windows)
            if needle in (masker.detectors.redact(w.title)[0] if masker else w.title).casefold()
        ),
        None,
    )


async def wait_for(services: Services, call: CallInfo, args: WaitForInput) -> ToolResult:
    started = time.monotonic()
    timeout_s = args.timeout_ms / 1000
    result = WaitResult(elapsed_ms=0)
    observed: list[str] = []

    if args.window_title is not None:
        title = args.window_title

        async def check() -> bool:
            window = await _wait_window(services, title)
            result.window = window
            if window is None:
                titles = [w.title for w in await anyio.to_thread.run_sync(services.desktop.windows)]
                observed[:] = [f"window titles: {titles}"]
            return window is not None

    elif args.region is not None:
        watch = RegionWatch(services, args.region, observed)
        result.region = await watch.start()
        check = watch.check
    else:
        query = ElementQuery(role=args.role, name=args.name)
        access = a11y_of(services)

        async def check() -> bool:
            client = await access.client()
            observation = services.observer.observe()
            pids = (
                [args.pid]
                if args.pid is not None
                else sorted(
                    {
                        w.pid
                        for w in await anyio.to_thread.run_sync(services.desktop.windows)
                        if w.pid is not None
                    }
                )
            )
            for pid in pids:
                try:
                    snapshot, _ = await observation.app_tree(client, pid, max_elements=None)
                except DeskrigError as exc:
                    observed[:] = [f"pid {pid}: {exc.code.value}"]
                    continue
                matches = snapshot.find(query)
                if matches:
                    result.element = summarize(matches[0], snapshot.snapshot_id).model_dump(mode="json")
                    return True
                observed[:] = [
                    f"pid {pid}: {len(snapshot.elements)} elements, none matches {query.describe()}"
                ]
            return False

    if not await poll_until(check, timeout_s, POLL_S):
        raise DeskrigError(
            ErrorCode.TIMEOUT,
            f"the condition did not hold within {args.timeout_ms} ms",
            details={"timeout_ms": args.timeout_ms, "observed": observed},
        )
    result.elapsed_ms = round((time.monotonic() - started) * 1000, 1)
    return ToolResult(result)


class RegionWatch:
    """Compares captures of one region: ``changed`` since the first, or ``stable`` for a while."""

    def __init__(self, services: Services, spec: RegionCondition, observed: list[str]) -> None:
        self._services = services
        self._spec = spec
        self._observed = observed
        self._first: Image.Image | None = None
        self._last: Image.Image | None = None
        self._since = time.monotonic()

    async def start(self) -> Bounds:
        from deskrig.tools.screen import region_target

        spec = self._spec
        self._region = (
            await anyio.to_thread.run_sync(
                region_target, self._services, spec.x, spec.y, spec.width, spec.height
            )
        ).region
        self._first = self._last = await anyio.to_thread.run_sync(
            self._services.desktop.capture, self._region
        )
        self._since = time.monotonic()
        return self._region

    async def check(self) -> bool:
        assert self._first is not None and self._last is not None
        now = await anyio.to_thread.run_sync(self._services.desktop.capture, self._region)
        if self._spec.condition == "changed":
            self._observed[:] = ["region unchanged since the wait began"]
            return ImageChops.difference(now, self._first).getbbox() is not None
        if ImageChops.difference(now, self._last).getbbox() is not None:
            self._last, self._since = now, time.monotonic()
        quiet_ms = (time.monotonic() - self._since) * 1000
        self._observed[:] = [f"region quiet for {quiet_ms:.0f} ms of {self._spec.stable_ms}"]
        return quiet_ms >= self._spec.stable_ms


TOOLS: list[AnyTool] = [
    ToolSpec(
        "launch_app",
        "Start an app on this desktop; by default returns once one of its windows is mapped.",
        LaunchAppInput,
        LaunchResult,
        launch_app,
        read_only=False,
        recorded=False,
        destructive=False,
        title="Launch an app",
    ),
    ToolSpec(
        "kill_app",
        "Stop an app that owns a window here or was started with launch_app (SIGTERM, then SIGKILL).",
        KillAppInput,
        KillResult,
        kill_app,
        read_only=False,
        recorded=False,
        title="Stop an app",
    ),
    ToolSpec(
        "focus_window",
        "Raise and focus a window, and read back that it is focused.",
        FocusWindowInput,
        ActionResult,
        focus_window,
        read_only=False,
        recorded=False,
        destructive=False,
        title="Focus a window",
    ),
    ToolSpec(
        "wait_for",
        "Wait (up to 30 s) until a window appears, an accessibility element exists, or a screen region "
        "changes or is stable; instead of sleeping.",
        WaitForInput,
        WaitResult,
        wait_for,
        title="Wait for a condition",
    ),
]
