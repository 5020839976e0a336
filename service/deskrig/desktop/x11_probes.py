"""What the rig needs from X11 while it starts a desktop: access for the rig's user, the window
manager's arrival, and the app's first window.

Small blocking checks the rig polls (see :mod:`deskrig.rig`). Where python-xlib cannot be handed
a cookie the X protocol is spoken raw; the window manager and window pid tests are
:mod:`deskrig.desktop.x11_windows`' own, so the rig and the desktop backend agree about both.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from Xlib import X
from Xlib.display import Display

from deskrig.desktop.x11_windows import VANISHED, window_pid, wm_check_window
from deskrig.files import write_atomic

_COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"


def _pad4(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def write_xauthority(path: Path, cookie: bytes) -> None:
    """An Xauthority file (mode 0600) whose cookie matches any display number (numbers are empty):
    a FamilyWild entry for libXau and a FamilyLocal one for python-xlib."""

    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    entries = ((0xFFFF, b""), (256, socket.gethostname().encode()))
    data = b"".join(
        struct.pack(">H", family) + counted(address) + counted(b"") + counted(_COOKIE_NAME) + counted(cookie)
        for family, address in entries
    )
    write_atomic(path, data, mode=0o600)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the X server closed the connection")
        data += chunk
    return data


def grant_local_user(display_number: int, cookie: bytes, user: str, timeout: float) -> None:
    """Connect with the cookie and add ``si:localuser:USER`` to the server's access list.

    python-xlib and libX11 read cookies only from ``$XAUTHORITY``, which a process supervising
    several rigs cannot point at each one; this is the same request ``xhost`` sends, in raw
    protocol because python-xlib cannot be handed a cookie.
    """
    setup = struct.pack("<BxHHHHxx", ord("l"), 11, 0, len(_COOKIE_NAME), len(cookie))
    address = b"localuser\0" + user.encode()
    change_hosts = struct.pack("<BBHBxH", 109, 0, 2 + len(_pad4(address)) // 4, 5, len(address))
    get_input_focus = struct.pack("<BxH", 43, 1)  # a round trip: its reply or an error follows
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(f"/tmp/.X11-unix/X{display_number}")
        sock.sendall(setup + _pad4(_COOKIE_NAME) + _pad4(cookie))
        head = _recv_exact(sock, 8)
        body = _recv_exact(sock, struct.unpack_from("<H", head, 6)[0] * 4)
        if head[0] != 1:
            reason = body[: head[1]].decode("latin-1")
            raise ConnectionError(f"the X server refused the rig's own cookie: {reason}")
        sock.sendall(change_hosts + _pad4(address) + get_input_focus)
        reply = _recv_exact(sock, 32)
        if reply[0] == 0:
            raise ConnectionError(f"ChangeHosts failed with X error code {reply[1]}")


def _top_level_windows(display: Display) -> list[int]:
    """Managed clients from _NET_CLIENT_LIST while a window manager runs, else the root's children.

    A WM that died leaves its last _NET_CLIENT_LIST on the root: a window mapped after it is on
    no list, so the list counts only while :func:`wm_check_window` finds the WM alive."""
    root = display.screen().root
    if wm_check_window(display) is not None:
        clients = root.get_full_property(display.get_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        if clients is not None:
            return [int(wid) for wid in clients.value]
    return [child.id for child in root.query_tree().children]


def mapped_windows(display: Display) -> list[tuple[int, int | None, str]]:
    """(id, pid, title) of every viewable top-level client window."""
    found = []
    for wid in _top_level_windows(display):
        window = display.create_resource_object("window", wid)
        try:
            attrs = window.get_attributes()
            if attrs.map_state != X.IsViewable or attrs.override_redirect:
                continue
            found.append((wid, window_pid(display, window), str(window.get_wm_name() or "")))
        except VANISHED:
            continue  # destroyed while we looked
    return found
