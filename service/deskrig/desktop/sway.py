"""The sway backend: sway's IPC (i3ipc) for outputs and windows, wlr-screencopy for pixels.

Attaches to a running sway named by ``SWAYSOCK`` (IPC) and ``WAYLAND_DISPLAY`` (with
``XDG_RUNTIME_DIR``). Two connections, each with one job: the IPC socket answers questions about
the layout and runs commands (focus); the Wayland connection copies pixels. While captures come,
a third (:mod:`~deskrig.desktop.sway_damage`) holds the frame sway last drew: a capture that
provably nothing has changed since is that frame, at once; any other waits for sway's next frame.

Windows are sway's views: id = the container id (stable for the life of the window), app =
``app_id`` (native Wayland) or the X11 class (Xwayland), bounds = the content area in layout
coordinates, minimized = in the scratchpad, z-order = sway's focus order (most recent first),
floating windows before the tiled ones of their workspace (sway draws them above).

Window capture copies the window's area of its output: with tiling no window covers another, so
that is the window's own contents. sway 1.7 offers no per-window capture protocol, so floating
windows over it are made transparent (``opacity 0``, one IPC command for them all) for the one
frame the copy takes, then opaque again: the window's own pixels, its position and everyone's
focus untouched. A window sway does not draw at all (another workspace, a hidden tab, behind a
fullscreen window) is refused rather than shown as whatever is there instead.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from i3ipc import Connection
from PIL import Image

from deskrig.desktop.base import DesktopBackend, WindowCapture
from deskrig.desktop.sway_damage import DamageWatch
from deskrig.desktop.sway_wayland import WaylandConnection
from deskrig.errors import BackendError, DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import FIRST_DISPLAY_ID, Bounds, CursorPosition, DisplayInfo, Point, WindowInfo

log = logging.getLogger(__name__)

#: The workspace sway keeps scratchpad ("minimized") windows on.
SCRATCHPAD = "__i3_scratch"


@dataclass
class PointerState:
    """Where the virtual pointer is (the seat's only pointer, so this is the cursor), and when our
    input last changed what sway draws: moved the cursor (sway draws it into its frames) or
    focused a window (its border changes colour). Monotonic seconds, read once sway had it all:
    a capture after it must show a frame drawn after it."""

    x: int = 0
    y: int = 0
    drawn_change_at: float = 0.0
    #: Where a button was last pressed (None: never, or Shift+F10 or the Menu key went down since).
    pressed_at: Point | None = None


@dataclass(frozen=True)
class SwaySockets:
    """How to reach one sway: its IPC socket, its Wayland display and its Xwayland's X display
    (``DISPLAY``; empty without Xwayland)."""

    ipc: str
    wayland: str
    x11: str = ""

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> SwaySockets:
        """From ``SWAYSOCK`` and ``WAYLAND_DISPLAY`` in ``env`` (default: ours); a relative Wayland
        display is made a path in ``env``'s ``XDG_RUNTIME_DIR``, which need not be ours."""
        env = os.environ if env is None else env
        ipc, wayland = env.get("SWAYSOCK", ""), env.get("WAYLAND_DISPLAY", "")
        if wayland and not os.path.isabs(wayland) and env.get("XDG_RUNTIME_DIR"):
            wayland = os.path.join(env["XDG_RUNTIME_DIR"], wayland)
        if not ipc or not wayland:
            raise DeskrigError(
                ErrorCode.DISPLAY_NOT_FOUND,
                "the sway backend needs SWAYSOCK and WAYLAND_DISPLAY",
                details={"SWAYSOCK": ipc or None, "WAYLAND_DISPLAY": wayland or None},
                remediation="Run inside a sway session (it sets both), or export them for a running sway.",
            )
        return cls(ipc=ipc, wayland=wayland, x11=env.get("DISPLAY", ""))


def close_ipc(ipc: Connection) -> None:
    """Close an i3ipc connection's sockets (i3ipc has no public close for the command socket)."""
    ipc.main_quit()
    sock = getattr(ipc, "_cmd_socket", None)
    if sock is not None:
        sock.close()


#: sway's IPC framing (sway-ipc(7)): magic, payload length, message type, native byte order.
_IPC_MAGIC = b"i3-ipc"
_IPC_HEADER = struct.Struct("=6sII")
_IPC_GET_TREE = 4


class LayoutReader:
    """A socket of its own on sway's IPC that reads the layout tree, the one question the backend
    and the input device ask about the layout.

    The tree holds the active outputs (rect, scale, current workspace) as well as every view, so
    one ``GET_TREE`` answers what ``get_outputs`` and ``get_tree`` answered in two requests, and
    the reply is parsed as plain JSON (i3ipc would build an object for every node). It is read
    afresh for every use rather than kept up to date from sway's IPC events: sway 1.7 sends none
    when a window is moved or resized (``move position``, ``resize set``, a floating client's own
    resize), when a border changes or when an output changes mode, so a tree kept from events
    would go stale without a sign. Not thread-safe: each owner serialises its own calls.
    """

    def __init__(self, path: str) -> None:
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.connect(path)
        except OSError:
            self._socket.close()
            raise

    def tree(self) -> dict[str, Any]:
        """sway's layout as it is now. OSError when sway's IPC is gone."""
        self._socket.sendall(_IPC_HEADER.pack(_IPC_MAGIC, 0, _IPC_GET_TREE))
        magic, length, kind = _IPC_HEADER.unpack(self._read(_IPC_HEADER.size))
        if magic != _IPC_MAGIC or kind != _IPC_GET_TREE:
            raise ConnectionError(f"sway's IPC answered GET_TREE with message type {kind}")
        return cast(dict[str, Any], json.loads(self._read(length)))

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("sway closed its IPC socket")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._socket.close()


def active_outputs(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The tree's outputs: every one sway shows (a disabled output is not in the tree), not the
    pseudo-output ``__i3`` holding the scratchpad."""
    return [o for o in tree.get("nodes", []) if o.get("type") == "output" and o.get("name") != "__i3"]


def layout_bounds(tree: dict[str, Any]) -> Bounds:
    """The box holding every active output of ``tree``."""
    return _union([_bounds(o["rect"]) for o in active_outputs(tree)])


def _displays(tree: dict[str, Any]) -> list[DisplayInfo]:
    outputs = active_outputs(tree)
    # sway has no "primary" output; the one at the layout's origin plays that part.
    outputs.sort(key=lambda o: (o["rect"]["x"] != 0 or o["rect"]["y"] != 0, o["rect"]["x"], o["rect"]["y"]))
    return [
        DisplayInfo(
            id=number,
            name=o["name"],
            bounds=_bounds(o["rect"]),
            primary=number == FIRST_DISPLAY_ID,
            scale=float(o.get("scale") or 1.0),
        )
        for number, o in enumerate(outputs, start=FIRST_DISPLAY_ID)
    ]


def _bounds(rect: dict[str, int]) -> Bounds:
    return Bounds(x=rect["x"], y=rect["y"], width=rect["width"], height=rect["height"])


@dataclass(frozen=True)
class _Piece:
    """The piece of a capture one output holds: ``part`` in layout coordinates, ``local`` in the
    output's own."""

    output: str
    part: Bounds
    local: Bounds


def _union(boxes: list[Bounds]) -> Bounds:
    """The screen: the smallest box holding every output."""
    if not boxes:
        raise BackendError(ErrorCode.DISPLAY_NOT_FOUND, "sway has no active output")
    x0, y0 = min(b.x for b in boxes), min(b.y for b in boxes)
    x1, y1 = max(b.right for b in boxes), max(b.bottom for b in boxes)
    return Bounds(x=x0, y=y0, width=x1 - x0, height=y1 - y0)


def _window_not_found(window_id: int) -> DeskrigError:
    return DeskrigError(
        ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
    )


def _views(node: dict[str, Any], workspace: str = "") -> Iterator[tuple[dict[str, Any], str]]:
    """Every view (a container holding a window) under ``node``, with its workspace's name,
    children visited in the parent's focus order so the walk yields most recently focused first,
    except that a workspace's floating views come before its tiled ones, which sway draws them over."""
    if node.get("type") == "workspace":
        workspace = node.get("name", "")
    children = {child["id"]: child for child in [*node.get("nodes", []), *node.get("floating_nodes", [])]}
    order = [cid for cid in node.get("focus", []) if cid in children]
    order += [cid for cid in children if cid not in order]
    floating = {child["id"] for child in node.get("floating_nodes", [])}
    order.sort(key=lambda cid: cid not in floating)  # stable: focus order within each group
    if not children and node.get("pid") is not None and node.get("type") in ("con", "floating_con"):
        yield node, workspace
    for cid in order:
        yield from _views(children[cid], workspace)


def _workspaces(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if node.get("type") == "workspace":
        yield node
        return
    for child in node.get("nodes", []):
        yield from _workspaces(child)


def views_over(tree: dict[str, Any], window_id: int) -> list[dict[str, Any]]:
    """The floating views sway draws over the view ``window_id``: on its workspace, every floating
    one over a tiled view; over a floating view, those later in the floating list (sway draws it
    in order, so the last is the top-most)."""
    for workspace in _workspaces(tree):
        layers = [[v for v, _ in _views(node)] for node in workspace.get("floating_nodes", [])]
        if any(v["id"] == window_id for node in workspace.get("nodes", []) for v, _ in _views(node)):
            return [v for layer in layers for v in layer]
        for index, layer in enumerate(layers):
            if any(v["id"] == window_id for v in layer):
                return [v for above in layers[index + 1 :] for v in above]
    return []


def view_at(tree: dict[str, Any], x: int, y: int) -> dict[str, Any] | None:
    """The view shown at layout point (x, y): on an output's current workspace, floating views
    (which sway draws above the tiled ones) first."""
    for output in tree.get("nodes", []):
        for workspace in output.get("nodes", []):
            if workspace.get("name") != output.get("current_workspace"):
                continue
            floating = [v for node in workspace.get("floating_nodes", []) for v, _ in _views(node)]
            tiled = [v for node in workspace.get("nodes", []) for v, _ in _views(node)]
            for view in [*floating, *tiled]:
                if _bounds(view["rect"]).contains(x, y):
                    return view
    return None


def content_bounds(view: dict[str, Any]) -> Bounds:
    """The area sway gives a view's window inside its container (``window_rect``, relative to the
    container's ``rect``), in layout coordinates. (``geometry`` in sway 1.7's tree is the size
    the window first asked for, not the size it has.)"""
    frame, area = _bounds(view["rect"]), _bounds(view["window_rect"])
    return Bounds(x=frame.x + area.x, y=frame.y + area.y, width=area.width, height=area.height)


def _window_info(view: dict[str, Any], workspace: str, z_order: int) -> WindowInfo:
    frame = _bounds(view["rect"])
    properties = view.get("window_properties") or {}
    return WindowInfo(
        id=view["id"],
        title=view.get("name") or "",
        app=view.get("app_id") or properties.get("class") or "",
        pid=view.get("pid"),
        bounds=content_bounds(view),
        frame_bounds=frame,
        minimized=workspace == SCRATCHPAD,
        focused=bool(view.get("focused")),
        z_order=z_order,
    )


class SwayBackend(DesktopBackend):
    """One running sway. ``pointer`` is shared with the :class:`SwayInput` that moves it."""

    name = "sway"
    captures_show_pointer = True  # wlr-screencopy (wlroots 0.15) cannot leave the drawn cursor out

    def __init__(self, sockets: SwaySockets, pointer: PointerState) -> None:
        super().__init__()
        self._sockets = sockets
        self._pointer = pointer
        self._serial = itertools.count(1)
        #: The damage serial last returned, and what it stood for: the damage watch's count of
        #: ended copies (None: it could not tell, and the next serial moves on) and our own last
        #: drawn change.
        self._serial_lock = threading.Lock()
        self._damage_serial = next(self._serial)
        self._serial_stands_for: tuple[int | None, float] = (None, 0.0)
        with self._translated("cannot connect to sway"):
            self._ipc = Connection(socket_path=sockets.ipc)
            try:
                self._layout = LayoutReader(sockets.ipc)
            except OSError:
                close_ipc(self._ipc)
                raise
        self._wayland = WaylandConnection(sockets.wayland)
        #: Started by the first capture or damage_fd() call; it holds copies of the screen only
        #: while captures come (and the live screen is watched), so an idle rig pays nothing.
        self._damage: DamageWatch | None = None
        self._damage_tried = False
        #: When our own IPC commands last changed what sway draws (see PointerState).
        self._drawn_change_at = 0.0
        # Under "capture", not "damage": that component says a backend cannot tell a still screen.
        self.note(
            "capture",
            "a capture while no damage has come since sway's last drawn frame is that frame, held by "
            "screencopy's copy_with_damage; otherwise it waits for sway's next frame. The damage "
            "serial holds still only while those held frames prove nothing was drawn (within ten "
            "seconds of a capture, or while the live screen or a video watches); the live screen "
            "sleeps on screencopy damage",
        )
        self.note(
            "cursor",
            "captures show the pointer: headless sway draws it into every frame, and wlr-screencopy "
            "(wlroots 0.15) cannot leave a drawn pointer out; X11 captures do not show it",
        )
        self.note(
            "capture",
            "window capture copies the window's screen area (wlr-screencopy), with the floating "
            "windows over it made transparent for that frame",
        )

    # -- the DesktopBackend methods -------------------------------------------------------------

    def displays(self) -> list[DisplayInfo]:
        return _displays(self._tree("cannot read the outputs"))

    def screen_bounds(self) -> Bounds:
        return layout_bounds(self._tree("cannot read the outputs"))

    def windows(self) -> list[WindowInfo]:
        tree = self._tree("cannot list windows")
        return [_window_info(view, ws, z) for z, (view, ws) in enumerate(_views(tree))]

    def capture(self, region: Bounds) -> Image.Image:
        return self.grab(region).image()

    def grab(self, region: Bounds) -> Grab:
        return self._grab(self._tree("cannot read the outputs"), region)

    def _grab(self, tree: dict[str, Any], region: Bounds) -> Grab:
        visible, pieces = self._pieces(tree, region)
        if len(pieces) == 1 and pieces[0].part == visible:
            # One output holds the whole region (always, with one output): its copy is the frame,
            # BGRX as sway hands it over, with no canvas to allocate and paste it onto.
            return self._copy(pieces[0])
        return Grab.of(self._composed(visible, pieces))

    def _copy(self, piece: _Piece) -> Grab:
        """The piece as sway last drew it when that is the screen now and shows our own changes
        (the damage watch's held frame), else as sway draws it next."""
        watch = self._damage_watch()
        if watch is None:
            return self._wayland.grab(piece.output, piece.local)
        drawn_change_at = max(self._pointer.drawn_change_at, self._drawn_change_at)
        held = watch.latest(piece.output, piece.local, drawn_change_at)
        if held is not None:
            return held
        asked_at = time.monotonic()
        fresh = self._wayland.grab(piece.output, piece.local)
        watch.confirm(piece.output, asked_at)  # the held frame may show our changes after all
        return fresh

    @staticmethod
    def _pieces(tree: dict[str, Any], region: Bounds) -> tuple[Bounds, list[_Piece]]:
        """The part of ``region`` on screen, and where each output of ``tree`` holds a piece of it."""
        displays = _displays(tree)
        screen = _union([d.bounds for d in displays])
        visible = region.intersection(screen)
        if visible is None:
            raise DeskrigError(
                ErrorCode.INVALID_REGION,
                "the region lies outside the screen",
                details={"region": region.model_dump(), "screen": screen.model_dump()},
            )
        return visible, [
            _Piece(d.name, part, part.model_copy(update={"x": part.x - d.bounds.x, "y": part.y - d.bounds.y}))
            for d in displays
            if (part := visible.intersection(d.bounds)) is not None
        ]

    def _composed(self, visible: Bounds, pieces: list[_Piece]) -> Image.Image:
        image = Image.new("RGB", (visible.width, visible.height))
        for piece in pieces:
            image.paste(self._copy(piece).image(), (piece.part.x - visible.x, piece.part.y - visible.y))
        return image

    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        return self.grab_window(window_id, include_frame).image

    def grab_window(self, window_id: int, include_frame: bool) -> WindowCapture:
        tree = self._tree("cannot list windows")
        found = next(((v, ws) for v, ws in _views(tree) if v["id"] == window_id), None)
        if found is None:
            raise _window_not_found(window_id)
        view, workspace = found
        if workspace == SCRATCHPAD or not view.get("visible", True):
            raise DeskrigError(
                ErrorCode.CAPTURE_FAILED,
                "sway is not drawing the window (in the scratchpad, on another workspace, in a "
                "hidden tab or behind a fullscreen window), so the screen does not show it",
                details={"window_id": window_id, "workspace": workspace},
                remediation="Focus the window first (focus_window), then capture it.",
            )
        area = _bounds(view["rect"]) if include_frame else content_bounds(view)
        covering = [v["id"] for v in views_over(tree, window_id) if _bounds(v["rect"]).intersection(area)]
        if not covering:
            return WindowCapture(self._grab(tree, area), "screen")
        self._set_opacity(covering, 0)
        try:
            return WindowCapture(self._grab(tree, area), "screen_uncovered")
        finally:
            self._set_opacity(covering, 1)

    def _set_opacity(self, window_ids: list[int], opacity: int) -> None:
        """Make windows transparent (0) or opaque again (1) in one IPC command. sway applies it
        before it answers and damages their area, so the next frame (the one a copy waits for)
        shows it. sway 1.7 does not report a window's opacity: opaque is what it is set back to."""
        self._command(
            "; ".join(f"[con_id={window_id}] opacity {opacity}" for window_id in window_ids),
            "change the opacity of the windows over the captured one",
            ErrorCode.CAPTURE_FAILED,
            covering_windows=window_ids,
        )

    def cursor_position(self) -> CursorPosition:
        x, y = self._pointer.x, self._pointer.y
        display_id = next((d.id for d in self.displays() if d.bounds.contains(x, y)), None)
        return CursorPosition(x=x, y=y, display_id=display_id)

    def activate_window(self, window_id: int) -> None:
        self._window(window_id)
        # sway shows a scratchpad window that criteria focus, which is "un-minimising" it.
        self._command(
            f"[con_id={window_id}] focus", "focus the window", ErrorCode.INPUT_FAILED, window_id=window_id
        )

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        # Xwayland clients see an X screen laid out like sway's outputs, so their "screen"
        # coordinates are already layout coordinates; native Wayland clients are never told where
        # their surface is and report positions relative to it (GTK: its content area).
        tree = self._tree("cannot list windows")
        native = [
            _window_info(view, ws, z)
            for z, (view, ws) in enumerate(_views(tree))
            if view.get("pid") == pid and view.get("shell") != "xwayland"
        ]
        # sway numbers containers as it creates them: by id is the order the windows were mapped.
        return [(w, Point(x=w.bounds.x, y=w.bounds.y)) for w in sorted(native, key=lambda w: w.id)]

    def last_press(self) -> Point | None:
        return self._pointer.pressed_at

    def damage_serial(self) -> int:
        # Stays put only while the damage watch proves sway drew nothing since the last call and
        # we changed nothing it is still to draw, so a damage notification another caller drained
        # (a screenshot, the other changing-screen loop) still moves the serial for a loop asleep
        # on the fd.
        ended = None
        if self._damage is not None:
            self._damage.drain()
            ended = self._damage.ended()
        stands_for = (ended, max(self._pointer.drawn_change_at, self._drawn_change_at))
        with self._serial_lock:
            if ended is None or stands_for != self._serial_stands_for:
                self._damage_serial = next(self._serial)
            self._serial_stands_for = stands_for
            return self._damage_serial

    def damage_fd(self) -> int | None:
        watch = self._damage_watch()
        return watch.fileno() if watch is not None else None

    def _damage_watch(self) -> DamageWatch | None:
        if not self._damage_tried:
            self._damage_tried = True
            try:
                self._damage = DamageWatch(self._sockets.wayland)
            except DeskrigError as exc:
                self.note(
                    "damage",
                    f"no damage watch ({exc.message}): the live screen compares grabs, and every "
                    "capture waits for sway's next frame",
                )
        return self._damage

    def close(self) -> None:
        try:
            if self._damage is not None:
                self._damage.close()
            self._wayland.close()
        finally:
            self._layout.close()
            close_ipc(self._ipc)

    # -- helpers --------------------------------------------------------------------------------

    def _window(self, window_id: int) -> WindowInfo:
        window = next((w for w in self.windows() if w.id == window_id), None)
        if window is None:
            raise _window_not_found(window_id)
        return window

    def _tree(self, what: str) -> dict[str, Any]:
        """The layout now (:class:`LayoutReader`); ``what`` names the question, for the error."""
        with self._translated(what):
            return self._layout.tree()

    def _command(self, command: str, what: str, code: ErrorCode, **details: object) -> None:
        """Run sway ``command``s; one refused is ``code``, saying sway refused to do ``what``."""
        with self._translated(f"cannot {what}", **details):
            replies = self._ipc.command(command)
        # sway has applied what succeeded and damaged the screen for it: captures from now on
        # must show it (sway_damage: a frame held from before is not used).
        self._drawn_change_at = time.monotonic()
        failed = [r.error for r in replies if not r.success]
        if failed:
            raise BackendError(code, f"sway refused to {what}: {failed[0]}", details=details)

    @contextmanager
    def _translated(self, message: str, **details: object) -> Iterator[None]:
        """A lost or refused IPC socket means sway is gone: DISPLAY_NOT_FOUND, never a traceback."""
        try:
            yield
        except OSError as exc:
            raise BackendError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"{message}: sway's IPC socket {self._sockets.ipc!r} is not reachable ({exc})",
                details={"swaysock": self._sockets.ipc, **details},
                remediation="Check that sway is running and SWAYSOCK names its socket.",
            ) from exc
