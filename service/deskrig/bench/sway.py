"""Sway benchmark: the sway backend against the X11 backend and the Wayland command-line tools
(``grim``, ``wtype``, ``swaymsg``), same app at the same size, measured side by side in one run.

Both desktops run at once: an X11 rig and a headless sway, each showing gtk3-widget-factory at
1280x800 (tiled full-screen under sway, openbox's placement under X11: the window sizes are in the
row names), each a :class:`~deskrig.rig.Rig` as ``deskrig rig run`` starts it. The cold-start table
times ``deskrig rig run`` from spawn to ``/readyz`` 200 for both backends. The idle table shows what
an untouched sway rig costs (sway's CPU and wake-ups, and this process's, which serves it): before
any capture, while the damage watch holds frames after a few, and once it has given them back.
The still-rig table puts an X11 rig and a sway rig showing the GTK example's form (which draws
nothing once its text cursor stops blinking) side by side, every process of each rig counted: what
an idle rig costs on each backend, and who spends it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio

from deskrig.bench.actions import TEXT_100, call_tool
from deskrig.bench.capture import peer_capture, screenshot_call
from deskrig.bench.reliability_rig import BenchRig
from deskrig.bench.stats import (
    Row,
    Timing,
    awaitable,
    measure_interleaved,
    print_table,
    process_cpu_seconds,
    write_table_head,
)
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop, sway_damage
from deskrig.model import Bounds, WindowInfo
from deskrig.rig import Rig, RigOptions
from deskrig.rig.options import RigBackend
from deskrig.server import DeskrigServer
from deskrig.serving import build_server

SIZE = (1280, 800)
APP = ["gtk3-widget-factory"]
#: Samples of each cold start: every one boots a whole rig, a few seconds on two cores.
COLD_STARTS = 3
WINDOW_TIMEOUT_S = 30.0
#: How long each idle measurement watches the sway rig do nothing.
IDLE_SECONDS = 10.0
#: Of the time the damage watch holds frames after the last capture, how much the idle
#: measurement "frames held" watches (the rest passes before "frames given back" starts).
HELD_SECONDS = sway_damage.HOLD_SECONDS / 2
#: Screenshots that arm the damage watch before the idle rig is watched again.
IDLE_CAPTURES = 5
#: A still app for the idle rigs: the GTK example's form (Debian's python3-gi, not this venv).
STILL_APP = [
    "/usr/bin/python3",
    str(Path(__file__).resolve().parents[3] / "images" / "apps" / "gtk" / "gtk_form.py"),
]
#: How long the still rigs settle before they are watched: GTK stops blinking the focused entry's
#: text cursor after 10 s (gtk-cursor-blink-timeout).
STILL_SETTLE_SECONDS = 11.0
#: A region well inside the screen, for the cost of copying only part of an output.
REGION = Bounds(x=100, y=100, width=400, height=300)
#: What each side does, printed under the tables so the comparisons can be judged.
METHOD = """
How the sides compare (same app, same 1280x800 output, same lossless PNG pixels):
- peers are processes spawned per sample with the rig's environment, as a script would run them:
  `grim -` writes the whole output as PNG (zlib level 6, grim's default) to a pipe read here;
  `grim -g 'X,Y WxH' -` the window's area; a click is one `swaymsg` (seat cursor set, press,
  release: wtype has no pointer) then `grim -` to /dev/null; `grim -l 1` is grim at its fastest
  PNG level, for reference. `wtype TEXT` types the 100 characters.
- X11 and sway are deskrig's tools called in-process (handler, no MCP transport): capture, mask,
  encode (PNG: lossless, unfiltered, ISA-L level 2), with the damage cache off so every capture
  is grabbed and encoded anew. The click is `click` with include_screenshot: the virtual pointer
  (sway) or XTest (X11), then the target window's PNG. The sway click point stays the same, as a
  repeated click would: a Wayland window is clicked with no pointer motion on screen.
- A sway capture is the frame sway last drew when the damage watch can prove no damage came
  since (held from copy_with_damage, sway_damage.py), else it waits for sway's next frame; the
  widget factory's spinners redraw every frame, so the screen is never still here.
- CPU time counts this process and the peers' processes, not the compositor's or X server's;
  the idle table counts sway's own.
- The still rigs (no client, no capture, no accessibility bus): an idle sway wakes about 60 times
  a second, none of it the rig's doing. sway 1.7's wlroots 0.15 headless backend re-arms every output's frame timer
  whether or not anything was drawn, and sway keeps a second headless output, FALLBACK (800x600,
  60 Hz, for when no output is left), which no config reaches ("Refusing to configure the no op
  output"). The two timers fire together, so a slower HEADLESS-1 leaves the wake-ups as they are
  and saves only its idle frame's check, while a capture after an app's redraw would wait up to
  a refresh interval for its frame: the output stays at 60 Hz.
"""

#: A named thing to time, once per round (see ``measure_interleaved``).
Case = tuple[str, Callable[[], Awaitable[object]]]


@dataclass
class Side:
    """One backend's desktop showing the app, a server over it, and what its peers need."""

    label: str
    desktop: Desktop
    server: DeskrigServer
    env: dict[str, str]
    window: WindowInfo
    #: The rig's processes by name (``sway``, ``Xvfb``, the app...).
    processes: dict[str, int]

    def click_point(self) -> tuple[int, int]:
        """Inside the widget factory's empty "Inset" frame: a click there changes nothing."""
        bounds = self.window.bounds
        return bounds.x + bounds.width * 3 // 4, bounds.y + bounds.height // 6


def _app_window(desktop: Desktop, what: str) -> WindowInfo:
    deadline = time.monotonic() + WINDOW_TIMEOUT_S
    while time.monotonic() < deadline:
        windows = desktop.windows()
        if windows:
            return max(windows, key=lambda w: w.bounds.width * w.bounds.height)
        time.sleep(0.1)
    raise RuntimeError(f"{APP[0]} showed no window on {what} within {WINDOW_TIMEOUT_S:g} s")


def _server(desktop: Desktop) -> DeskrigServer:
    # The damage cache is off: every capture grabs and encodes anew, on both backends.
    return build_server(desktop, load_settings(env={}, overrides={"reuse_unchanged_captures": False}))


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ while open: the sway backend attaches from the environment."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def rig_side(backend: RigBackend, label: str) -> Iterator[Side]:
    width, height = SIZE
    with ExitStack() as stack:
        rig = stack.enter_context(
            Rig(RigOptions(backend=backend, size=f"{width}x{height}", app=APP, a11y=False))
        )
        env = {**os.environ, **rig.env}
        if backend == "x11":
            desktop = stack.enter_context(open_desktop("x11", rig.display))
        else:
            stack.enter_context(_environment(rig.env))
            desktop = stack.enter_context(open_desktop("sway"))
        processes = {proc.name: proc.pid for proc in rig.processes}
        yield Side(label, desktop, _server(desktop), env, _app_window(desktop, label), processes)


def _size(bounds: Bounds) -> str:
    return f"{bounds.width}x{bounds.height}"


def _capture_cases(x11: Side, sway: Side) -> list[Case]:
    screen, box, x11_box = sway.desktop.screen_bounds(), sway.window.bounds, x11.window.bounds
    grim_window = f"grim -g '{box.x},{box.y} {_size(box)}' -"
    return [
        ("peer: grim - (full screen)", awaitable(peer_capture("grim -", sway.env))),
        ("X11: screenshot_screen png", screenshot_call(x11.server, {})),
        ("sway: screenshot_screen png", screenshot_call(sway.server, {})),
        (f"peer: {grim_window} (window)", awaitable(peer_capture(grim_window, sway.env))),
        (
            f"X11: screenshot_window png ({_size(x11_box)})",
            screenshot_call(x11.server, {"window_id": x11.window.id}, "screenshot_window"),
        ),
        (
            f"sway: screenshot_window png ({_size(box)})",
            screenshot_call(sway.server, {"window_id": sway.window.id}, "screenshot_window"),
        ),
        # After an encode, not straight after another sway capture, as the other cases come.
        (f"sway: raw capture, {_size(REGION)} region", awaitable(lambda: sway.desktop.capture(REGION))),
        ("X11: raw capture, full screen", awaitable(lambda: x11.desktop.capture(screen))),
        ("sway: raw capture, full screen", awaitable(lambda: sway.desktop.capture(screen))),
    ]


def capture_rows(x11: Side, sway: Side, runs: int) -> list[Row]:
    timings = anyio.run(measure_interleaved, _capture_cases(x11, sway), runs)
    grim, x11_png, sway_png, grim_window, x11_window, sway_window, sway_region, x11_raw, sway_raw = timings
    return [
        Row(grim),
        Row(x11_png),
        Row(sway_png, grim, 3.0),
        Row(sway_png, x11_png, 0.5),
        Row(grim_window),
        Row(x11_window),
        Row(sway_window, grim_window, 3.0),
        Row(sway_window, x11_window, 0.5),
        Row(x11_raw),
        Row(sway_raw, x11_raw),
        Row(sway_region, sway_raw),
    ]


def _click_call(side: Side) -> Callable[[], Awaitable[object]]:
    x, y = side.click_point()
    return lambda: call_tool(side.server, "click", {"x": x, "y": y, "include_screenshot": True})


def action_rows(x11: Side, sway: Side, runs: int) -> list[Row]:
    x, y = sway.click_point()
    # wtype has no pointer: swaymsg moves and clicks sway's own cursor, in one process.
    clicks = f"seat - cursor set {x} {y}, seat - cursor press button1, seat - cursor release button1"
    peer_click = f"swaymsg '{clicks}' >/dev/null && grim - >/dev/null"
    fastest_peer_click = peer_click.replace("grim -", "grim -l 1 -")
    clicking: list[Case] = [
        (
            "peer: swaymsg click + grim -",
            awaitable(lambda: subprocess.run(peer_click, shell=True, env=sway.env, check=True)),
        ),
        (
            "peer: swaymsg click + grim -l 1 -",
            awaitable(lambda: subprocess.run(fastest_peer_click, shell=True, env=sway.env, check=True)),
        ),
        ("X11: click + after-screenshot", _click_call(x11)),
        ("sway: click + after-screenshot", _click_call(sway)),
    ]
    typing: list[Case] = [
        (
            "peer: wtype, 100 chars",
            awaitable(lambda: subprocess.run(["wtype", TEXT_100], env=sway.env, check=True)),
        ),
        ("sway: type_text, 100 chars", lambda: call_tool(sway.server, "type_text", {"text": TEXT_100})),
    ]
    peer_clicked, fastest_peer_clicked, x11_click, sway_click = anyio.run(measure_interleaved, clicking, runs)
    peer_typed, sway_typed = anyio.run(measure_interleaved, typing, max(3, runs // 5))
    return [
        Row(peer_clicked),
        Row(fastest_peer_clicked),
        Row(x11_click),
        Row(sway_click, peer_clicked, 5.0),
        Row(sway_click, fastest_peer_clicked),
        Row(sway_click, x11_click),
        Row(peer_typed),
        Row(sway_typed, peer_typed, 1.0),
    ]


def _cold_start(extra: list[str]) -> float:
    rig = BenchRig(app=APP, extra=extra)
    started = time.perf_counter()
    try:
        rig.start()
        return (time.perf_counter() - started) * 1000
    finally:
        rig.cleanup()


def _cold_starts() -> None:
    x11 = Timing("X11: deskrig rig run -- gtk3-widget-factory", [_cold_start([]) for _ in range(COLD_STARTS)])
    name = "sway: deskrig rig run --backend sway -- gtk3-widget-factory"
    try:
        sway = Timing(name, [_cold_start(["--backend", "sway"]) for _ in range(COLD_STARTS)])
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        print_table(f"cold start to /readyz 200 (p50 of {COLD_STARTS})", [Row(x11)])
        sys.stdout.write(f"\nsway cold start: NOT AVAILABLE in this build ({reason})\n")
        return
    print_table(f"cold start to /readyz 200 (p50 of {COLD_STARTS})", [Row(x11), Row(sway, x11)])


def _task_counters(pid: int) -> dict[int, tuple[int, int]]:
    """Each live thread of ``pid``: its run time so far (ns) and its context switches so far."""
    counters = {}
    for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
        with suppress(FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            run_ns = int((task / "schedstat").read_text().split()[0])
            switches = sum(
                int(line.split()[1])
                for line in (task / "status").read_text().splitlines()
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
            )
            counters[int(task.name)] = (run_ns, switches)
    return counters


def _spent(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Run time (ns) and context switches between two counts, by the threads alive at the second
    (a thread that ended in between takes its share along; a sum over threads would go negative)."""
    run_ns = sum(ns - before.get(tid, (0, 0))[0] for tid, (ns, _) in after.items())
    switches = sum(n - before.get(tid, (0, 0))[1] for tid, (_, n) in after.items())
    return run_ns, switches


def _wakeups(pid: int) -> int:
    """Context switches of every thread of ``pid`` so far: each is the process waking (or being
    woken from the CPU)."""
    return sum(switches for _, switches in _task_counters(pid).values())


@dataclass(frozen=True)
class Idle:
    """What the sway compositor and this process (the server) spent per second doing nothing."""

    when: str
    sway_cpu_ms: float
    sway_wakeups: float
    server_cpu_ms: float
    server_wakeups: float


def measure_idle(when: str, side: Side, seconds: float) -> Idle:
    pids = (side.processes["sway"], os.getpid())
    cpu = [process_cpu_seconds(pid) for pid in pids]
    wakeups = [_wakeups(pid) for pid in pids]
    time.sleep(seconds)
    spent = [
        (process_cpu_seconds(pid) - before) * 1000 / seconds for pid, before in zip(pids, cpu, strict=True)
    ]
    woken = [(_wakeups(pid) - before) / seconds for pid, before in zip(pids, wakeups, strict=True)]
    return Idle(when, spent[0], woken[0], spent[1], woken[1])


def idle_rows(sway: Side, seconds: float, held_seconds: float) -> list[Idle]:
    """The untouched sway rig idle: before any capture, in the first ``held_seconds`` after a few
    screenshots (the damage watch holding frames), then once it has given them back. Screenshots
    only, so the app's own redrawing stays what it was before."""
    rows = [measure_idle(f"{seconds:g} s before any capture", sway, seconds)]
    screen = sway.desktop.screen_bounds()
    for _ in range(IDLE_CAPTURES):
        sway.desktop.grab(screen)
    rows.append(
        measure_idle(
            f"first {held_seconds:g} s after {IDLE_CAPTURES} captures (frames held)", sway, held_seconds
        )
    )
    time.sleep(max(0.0, sway_damage.HOLD_SECONDS - held_seconds))
    rows.append(measure_idle(f"{seconds:g} s once the frames are given back", sway, seconds))
    return rows


def _with_children(pids: dict[str, int]) -> dict[str, int]:
    """``pids`` and the children of each (sway's Xwayland, if it started), a child named by /proc,
    its pid and its parent's name."""
    found = dict(pids)
    parents = {pid: name for name, pid in pids.items()}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):  # a process that ended meanwhile
            text = stat.read_text()
            name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
            parent, pid = int(fields[1]), int(stat.parent.name)
            if parent in parents:
                found[f"{name} ({parents[parent]}'s child {pid})"] = pid
    return found


@dataclass(frozen=True)
class ProcessIdle:
    """What one process of an idle rig spent per second."""

    rig: str
    process: str
    cpu_ms: float
    wakeups: float


def still_idle_rows(seconds: float) -> list[ProcessIdle]:
    """An X11 rig and a sway rig showing :data:`STILL_APP`, both idle, watched at once for
    ``seconds``: every process of each (and its children), no client and no capture."""
    width, height = SIZE
    with ExitStack() as stack:
        rigs = {
            label: stack.enter_context(
                Rig(RigOptions(backend=backend, size=f"{width}x{height}", app=STILL_APP, a11y=False))
            )
            for backend, label in (("x11", "X11"), ("sway", "sway"))
        }
        time.sleep(STILL_SETTLE_SECONDS)
        watched = [
            (label, name, pid)
            for label, rig in rigs.items()
            for name, pid in _with_children({proc.name: proc.pid for proc in rig.processes}).items()
        ]
        before = [_task_counters(pid) for _, _, pid in watched]
        time.sleep(seconds)
        spent = [
            _spent(counted, _task_counters(pid)) for (_, _, pid), counted in zip(watched, before, strict=True)
        ]
        return [
            ProcessIdle(label, name, run_ns / 1e6 / seconds, switches / seconds)
            for (label, name, _), (run_ns, switches) in zip(watched, spent, strict=True)
        ]


def print_still_idle(title: str, rows: list[ProcessIdle]) -> None:
    out = write_table_head(
        title, [("rig", "left"), ("process", "left"), ("CPU ms/s", "right"), ("wake-ups/s", "right")]
    )
    for row in rows:
        out.write(f"| {row.rig} | {row.process} | {row.cpu_ms:.2f} | {row.wakeups:.1f} |\n")
    for rig in dict.fromkeys(row.rig for row in rows):
        mine = [row for row in rows if row.rig == rig]
        out.write(
            f"| {rig} | **all** | {sum(r.cpu_ms for r in mine):.2f} | {sum(r.wakeups for r in mine):.1f} |\n"
        )
    out.flush()


def print_idle(title: str, rows: list[Idle]) -> None:
    out = write_table_head(
        title,
        [
            ("when", "left"),
            ("sway CPU ms/s", "right"),
            ("sway wake-ups/s", "right"),
            ("server CPU ms/s", "right"),
            ("server wake-ups/s", "right"),
        ],
    )
    for row in rows:
        out.write(
            f"| {row.when} | {row.sway_cpu_ms:.1f} | {row.sway_wakeups:.0f} | "
            f"{row.server_cpu_ms:.1f} | {row.server_wakeups:.0f} |\n"
        )
    out.flush()


def _cpu(rows: list[Row]) -> list[Row]:
    """The same comparisons in CPU time (the compositor's and X server's own work left out)."""
    return [Row(row.timing.cpu(), None if row.baseline is None else row.baseline.cpu()) for row in rows]


def run(runs: int) -> None:
    with rig_side("x11", "X11") as x11, rig_side("sway", "sway") as sway:
        title = f"{APP[0]} at {SIZE[0]}x{SIZE[1]}, {runs} runs"
        idle = idle_rows(sway, IDLE_SECONDS, HELD_SECONDS)
        load = os.getloadavg()
        captures, actions = capture_rows(x11, sway, runs), action_rows(x11, sway, runs)
        load_after = os.getloadavg()
    still = still_idle_rows(IDLE_SECONDS)
    sys.stdout.write(
        f"\nload average (1, 5, 15 min) before the timed cases: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; "
        f"after: {load_after[0]:.2f}, {load_after[1]:.2f}, {load_after[2]:.2f} on {os.cpu_count()} CPUs\n"
    )
    print_table(f"sway capture vs X11 and grim ({title})", captures)
    print_table(f"sway actions vs X11 and swaymsg/wtype/grim ({title})", actions)
    print_table(f"the same in CPU time ({title})", _cpu(captures + actions))
    print_idle(f"an idle sway rig showing {APP[0]} (per second)", idle)
    print_still_idle(
        f"idle rigs showing the GTK example's form, {STILL_SETTLE_SECONDS:g} s after ready, per second over "
        f"{IDLE_SECONDS:g} s (every process of each rig)",
        still,
    )
    sys.stdout.write(METHOD)
    _cold_starts()
