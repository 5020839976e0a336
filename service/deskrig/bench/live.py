"""Live screen benchmark: how soon an action shows in a browser watching ``/live``, and what
watching costs the rig.

Each on both Linux desktops: X11 (Xvfb; the loop sleeps on DAMAGE) and sway (headless, the xterm
under Xwayland; the loop sleeps on wlr-screencopy's copy_with_damage).

- Latency: a real rig (xterm, 1280x800) and Debian's Chromium (Playwright) on its ``/live`` page;
  each run presses a key over MCP (one connection, kept open) and waits for the page to show the
  next frame. From just before the call to the frame decoded and on the page (both clocks are this
  machine's). The screen changes only when typed into (xterm's cursor does not blink), so the next
  frame is the change. Target: p50 ≤ 150 ms.
- CPU of the rig's own processes (its server, which grabs and encodes, and the display server,
  which copies the pixels: Xvfb, or sway with its Xwayland; not the app) as a share of one core, with no viewer and with one viewer, on an
  idle screen (a still xterm) and a busy one (an xterm scrolling ``ls -lR /usr``). Target: idle
  screen with a viewer ≤ 2 %.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio.from_thread

from deskrig.bench.recording import BUSY_SCREEN
from deskrig.bench.reliability_rig import BenchRig
from deskrig.bench.stats import Timing, process_cpu_seconds
from deskrig.client import connect
from deskrig.procs import process_table

if TYPE_CHECKING:
    from playwright.sync_api import Page

SIZE = "1280x800"
BACKENDS = ("x11", "sway")
#: The name each backend's display server has in the rig's /readyz pids.
DISPLAY_SERVER = {"x11": "xvfb", "sway": "sway"}
LATENCY_TARGET_MS = 150.0
IDLE_CPU_TARGET = 2.0
CPU_SECONDS = 5.0
#: Between actions: a person's pace, and room for the previous frame to settle.
PAUSE_SECONDS = 0.2


@contextmanager
def _watching(rig: BenchRig) -> Iterator[Page]:
    """Chromium with the rig's /live page open and showing a first frame; yields the page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{rig.base}/live#token={rig.token}")
            page.wait_for_function("window.deskrigLive && window.deskrigLive.frames > 0", timeout=30000)
            yield page
        finally:
            browser.close()


@contextmanager
def _typist(rig: BenchRig) -> Iterator[Callable[[], None]]:
    """A function pressing a key in the rig over one MCP connection, kept open: the call
    is timed, not the connection's set-up. Its event loop runs on a thread of its own
    (Playwright's sync API holds one on this thread)."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connect(rig.url, rig.token)) as client,
    ):

        def type_one() -> None:
            result = portal.call(client.call_tool, "press_key", {"key": "x"})
            if result.is_error:
                raise RuntimeError(f"press_key failed: {result.content}")

        yield type_one


def _rig(backend: str, app: list[str]) -> BenchRig:
    return BenchRig(app=app, extra=["--size", SIZE, "--backend", backend]).start()


def _latency(backend: str, runs: int) -> Timing:
    rig = _rig(backend, ["xterm", "-geometry", "120x40+0+0"])
    try:
        with _watching(rig) as page, _typist(rig) as type_one:
            samples = []
            for index in range(runs + 2):
                time.sleep(PAUSE_SECONDS)
                seen = page.evaluate("window.deskrigLive.seq")
                started_ms = time.time() * 1000
                type_one()
                page.wait_for_function(f"window.deskrigLive.seq > {seen}", timeout=10000, polling="raf")
                if index >= 2:  # warm-up
                    shown_ms = page.evaluate("window.deskrigLive.shownMs")
                    samples.append(shown_ms - started_ms)
            return Timing(f"{backend}: press_key → frame shown in the browser", samples)
    finally:
        rig.cleanup()


def _rig_cpu(rig: BenchRig, backend: str, seconds: float) -> float:
    """The rig's server and display server (with its children: sway's Xwayland) together, in % of
    one core, over ``seconds``."""
    pids = rig.pids()
    display = pids[DISPLAY_SERVER[backend]]
    own = [pids["server"], display, *(e.pid for e in process_table() if e.ppid == display and not e.dead)]
    before, wall = sum(process_cpu_seconds(pid) for pid in own), time.monotonic()
    time.sleep(seconds)
    return 100 * (sum(process_cpu_seconds(pid) for pid in own) - before) / (time.monotonic() - wall)


def _cpu(backend: str, app: list[str]) -> tuple[float, float, float]:
    """(no viewer, one viewer) CPU of a rig running ``app``, and the frames a second the viewer got."""
    rig = _rig(backend, app)
    try:
        time.sleep(2.0)  # past the app's start-up
        alone = _rig_cpu(rig, backend, CPU_SECONDS)
        with _watching(rig) as page:
            time.sleep(1.0)
            frames = page.evaluate("window.deskrigLive.frames")
            watched = _rig_cpu(rig, backend, CPU_SECONDS)
            rate = (page.evaluate("window.deskrigLive.frames") - frames) / CPU_SECONDS
        return alone, watched, rate
    finally:
        rig.cleanup()


def run(runs: int) -> None:
    out = sys.stdout
    out.write(f"\n### live: action to change visible in the browser ({SIZE}, {runs} runs)\n\n")
    out.write("| case | p50 ms | p95 ms | target | met |\n|---|---:|---:|---:|:-:|\n")
    for backend in BACKENDS:
        latency = _latency(backend, runs)
        met = "yes" if latency.p50 <= LATENCY_TARGET_MS else "NO"
        out.write(
            f"| {latency.name} | {latency.p50:.1f} | {latency.p95:.1f} | ≤ {LATENCY_TARGET_MS:g} | {met} |\n"
        )
        out.flush()

    out.write(f"\n### live: rig CPU (server + display server), % of one core ({CPU_SECONDS:g} s each)\n\n")
    out.write("| desktop | screen | no viewer | one viewer | frames/s shown | target | met |\n")
    out.write("|---|---|---:|---:|---:|---:|:-:|\n")
    for backend in BACKENDS:
        idle, busy = _cpu(backend, ["xterm"]), _cpu(backend, BUSY_SCREEN)
        idle_met = "yes" if idle[1] <= IDLE_CPU_TARGET else "NO"
        out.write(f"| {backend} | idle (still xterm) | {idle[0]:.2f} | {idle[1]:.2f} | {idle[2]:.1f} | ")
        out.write(f"≤ {IDLE_CPU_TARGET:g} | {idle_met} |\n")
        out.write(
            f"| {backend} | busy (scrolling xterm) | {busy[0]:.1f} | {busy[1]:.1f} | {busy[2]:.1f} |  |  |\n"
        )
        out.flush()
    out.write(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)\n")
    out.flush()
