"""Top-level windows of an X11 desktop: EWMH when a window manager runs, the window tree otherwise.

Coordinates come from the X server, not from the window manager's idea of the window:
``translate_coords`` gives the client area's origin in root coordinates, so a WM's decoration
never leaks into a window's ``bounds``; the decoration shows up in ``frame_bounds`` instead.

Windows can vanish at any moment between two requests; a window that does is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.error import BadDrawable, BadMatch, BadValue, BadWindow
from Xlib.ext import res
from Xlib.xobject.drawable import Window

from deskrig.model import Bounds, WindowInfo

#: What a window that disappeared mid-query raises. BadValue/BadMatch cover ids reused meanwhile.
VANISHED = (BadWindow, BadDrawable, BadMatch, BadValue)

#: ICCCM WM_STATE values.
ICONIC_STATE = 3


@dataclass(frozen=True)
class Frame:
    """The root's child that holds a client: the WM frame, or the client itself without a WM."""

    window: Window
    bounds: Bounds
    border_width: int


def text_property(window: Window, atom: int, utf8_atom: int) -> str | None:
    """A text property: UTF8_STRING as UTF-8, STRING/COMPOUND_TEXT as Latin-1 (their common subset)."""
    prop = window.get_full_property(atom, X.AnyPropertyType)
    if prop is None or prop.format != 8:
        return None
    raw = prop.value if isinstance(prop.value, bytes) else str(prop.value).encode()
    return raw.decode("utf-8" if prop.property_type == utf8_atom else "latin-1", errors="replace")


def frame_of(root: Window, window: Window) -> Frame:
    """Walk up to the root's child that contains ``window``; its geometry includes the border."""
    current = window
    while True:
        parent = current.query_tree().parent
        if parent is None or parent.id in (root.id, X.NONE):
            break
        current = parent
    geometry = current.get_geometry()
    border = geometry.border_width
    bounds = Bounds(
        x=geometry.x, y=geometry.y, width=geometry.width + 2 * border, height=geometry.height + 2 * border
    )
    return Frame(window=current, bounds=bounds, border_width=border)


def client_bounds(root: Window, window: Window) -> Bounds:
    """The client area in root coordinates, without any decoration or border."""
    origin = root.translate_coords(window, 0, 0)
    geometry = window.get_geometry()
    return Bounds(x=origin.x, y=origin.y, width=geometry.width, height=geometry.height)


def wm_check_window(display: Display) -> int | None:
    """The window manager's EWMH check window, or None when no window manager runs.

    The one test of "is a window manager running?", asked afresh each time: the answer changes
    when a WM starts or dies. The root names a check window that names itself; a WM that died
    leaves its stale id on the root, naming a window that is gone (or, reused, names nothing).
    Two round trips.
    """
    atom = display.get_atom("_NET_SUPPORTING_WM_CHECK")
    check = _window_ids(display.screen().root, atom)
    if not check:
        return None
    try:
        named = _window_ids(display.create_resource_object("window", check[0]), atom)
    except VANISHED:
        return None
    return check[0] if named[:1] == check[:1] else None


def window_pid(display: Display, window: Window) -> int | None:
    """_NET_WM_PID, else the X-Resource extension's view of the owning client (Tk sets none)."""
    prop = window.get_full_property(display.get_atom("_NET_WM_PID"), Xatom.CARDINAL)
    if prop is not None and len(prop.value) > 0:
        return int(prop.value[0])
    if not display.has_extension("X-Resource"):
        return None
    reply = display.res_query_client_ids([{"client": window.id, "mask": res.LocalClientPIDMask}])
    for client in reply.ids:
        if client.spec.mask & res.LocalClientPIDMask and client.value:
            return int(client.value[0])
    return None


def _window_ids(window: Window, atom: int) -> list[int]:
    """A property of type WINDOW (an empty list when it is unset or of another type)."""
    prop = window.get_full_property(atom, Xatom.WINDOW)
    return [] if prop is None else [int(v) for v in prop.value]


class WindowLister:
    """Enumerates application windows over one X connection."""

    def __init__(self, display: Display) -> None:
        self._display = display
        self._root = display.screen().root
        atom = display.intern_atom
        self._utf8 = atom("UTF8_STRING")
        self._net_wm_name = atom("_NET_WM_NAME")
        self._net_wm_state = atom("_NET_WM_STATE")
        self._net_wm_state_hidden = atom("_NET_WM_STATE_HIDDEN")
        self._wm_state = atom("WM_STATE")
        self._client_list_stacking = atom("_NET_CLIENT_LIST_STACKING")
        self._client_list = atom("_NET_CLIENT_LIST")
        self._active_window = atom("_NET_ACTIVE_WINDOW")

    def window_manager_running(self) -> bool:
        return wm_check_window(self._display) is not None

    def collect(self) -> list[WindowInfo]:
        """Application windows, top-most first."""
        managed = self.window_manager_running()
        candidates = self._managed_clients() if managed else self._unmanaged_toplevels()
        focused = self._focused_frame(managed)
        windows: list[WindowInfo] = []
        for window in reversed(candidates):  # X lists stacking bottom to top
            try:
                info = self._describe(window, focused, z_order=len(windows))
            except VANISHED:
                continue
            if info is not None:
                windows.append(info)
        return windows

    def _managed_clients(self) -> list[Window]:
        ids = _window_ids(self._root, self._client_list_stacking) or _window_ids(
            self._root, self._client_list
        )
        return [self._display.create_resource_object("window", wid) for wid in ids]

    def _unmanaged_toplevels(self) -> list[Window]:
        """Without a WM, the root's children are the top-levels; keep the ones an app named."""
        toplevels = []
        for child in self._root.query_tree().children:
            try:
                attributes = child.get_attributes()
                if attributes.override_redirect or attributes.map_state != X.IsViewable:
                    continue
                if child.get_full_property(Xatom.WM_NAME, X.AnyPropertyType) is None and (
                    child.get_full_property(Xatom.WM_CLASS, X.AnyPropertyType) is None
                ):
                    continue
            except VANISHED:
                continue
            toplevels.append(child)
        return toplevels

    def _focused_frame(self, managed: bool) -> int | None:
        """The id of the root child holding the keyboard focus, if any."""
        if managed:
            active = _window_ids(self._root, self._active_window)
            if not active or active[0] == X.NONE:
                return None
            try:
                window = self._display.create_resource_object("window", active[0])
                return int(frame_of(self._root, window).window.id)
            except VANISHED:
                return None
        focus = self._display.get_input_focus().focus
        if focus == X.PointerRoot:
            # Keyboard input goes to whatever top-level is under the pointer.
            child = self._root.query_pointer().child
            return int(child.id) if child else None
        if not isinstance(focus, Window) or focus.id == self._root.id:
            return None
        try:
            return int(frame_of(self._root, focus).window.id)
        except VANISHED:
            return None

    def _describe(self, window: Window, focused: int | None, z_order: int) -> WindowInfo | None:
        minimized = self._minimized(window)
        # Iconified windows are unmapped by the WM but still belong to the app; other unmapped
        # clients (withdrawn, on another workspace) are not shown.
        if window.get_attributes().map_state != X.IsViewable and not minimized:
            return None
        frame = frame_of(self._root, window)
        wm_class = window.get_wm_class()
        return WindowInfo(
            id=window.id,
            title=text_property(window, self._net_wm_name, self._utf8)
            or text_property(window, Xatom.WM_NAME, self._utf8)
            or "",
            app=wm_class[1] if wm_class else "",
            pid=window_pid(self._display, window),
            bounds=client_bounds(self._root, window),
            frame_bounds=frame.bounds,
            minimized=minimized,
            focused=focused is not None and frame.window.id == focused,
            z_order=z_order,
        )

    def _minimized(self, window: Window) -> bool:
        state = window.get_full_property(self._net_wm_state, Xatom.ATOM)
        if state is not None and self._net_wm_state_hidden in state.value:
            return True
        wm_state = window.get_full_property(self._wm_state, self._wm_state)
        return wm_state is not None and len(wm_state.value) > 0 and wm_state.value[0] == ICONIC_STATE
