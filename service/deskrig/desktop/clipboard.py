"""The clipboard and the primary selection, the same way on every backend.

A backend implements :class:`SelectionStore`: which types a selection's owner offers, the bytes of
one of them, and taking ownership with data offered as a list of types (X11: own the selection
and answer conversions; sway: the Wayland data-control protocol through wl-clipboard; the
scripted desktop: a dict). :class:`Clipboard` puts the shared rules on top: text is offered under
every name toolkits ask for it by, a read without a type takes the text, a type the owner does
not offer is UNSUPPORTED_FORMAT listing the ones it does, and sizes are bounded.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Literal, Protocol

from deskrig.desktop.input_limits import MAX_CLIPBOARD_BYTES
from deskrig.errors import DeskrigError, ErrorCode

Selection = Literal["clipboard", "primary"]
SELECTIONS: tuple[Selection, ...] = ("clipboard", "primary")

#: The MIME type of text, as deskrig reports it.
TEXT_MIME = "text/plain;charset=utf-8"
#: The names UTF-8 text is offered and asked for by, preferred first: the MIME types of GTK, Qt and
#: Wayland clients, and X11's own target (Tk, xterm and Xwayland ask for UTF8_STRING).
TEXT_TYPES: tuple[str, ...] = (TEXT_MIME, "UTF8_STRING", "text/plain")
#: What a MIME type given to set_clipboard must look like (RFC 6838's type/subtype, parameters allowed).
_MIME = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(;.{1,200})?"
)


def is_text(mime: str) -> bool:
    return mime in TEXT_TYPES or mime.lower().replace(" ", "") == TEXT_MIME


@dataclass(frozen=True)
class ClipboardData:
    """What a selection held: ``data`` of type ``mime`` (None: no text, and no type asked for), and
    every type its owner offers (empty: nobody owns the selection)."""

    mime: str | None
    data: bytes
    available: tuple[str, ...]


class SelectionStore(Protocol):
    """One backend's access to the selections. Blocking; :class:`Clipboard` serialises calls."""

    def types(self, selection: Selection) -> list[str]:
        """The types the selection's owner offers ([] when nobody owns it)."""
        ...

    def fetch(self, selection: Selection, mime: str) -> bytes:
        """The selection's content as ``mime`` (one of :meth:`types`)."""
        ...

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        """Own the selection, serving ``data`` as each of ``types``, until another client takes it."""
        ...

    def close(self) -> None: ...


def too_large(size: int) -> DeskrigError:
    return DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"clipboard data of {size} bytes is over the limit of {MAX_CLIPBOARD_BYTES}",
        details={"size": size, "max_bytes": MAX_CLIPBOARD_BYTES},
        remediation="Transfer large data as a file instead.",
    )


def check_selection(selection: object) -> Selection:
    for name in SELECTIONS:
        if selection == name:
            return name
    raise DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"unknown selection {selection!r}",
        details={"selection": selection, "allowed": list(SELECTIONS)},
    )


def check_mime(mime: str) -> str:
    if not _MIME.fullmatch(mime) or not mime.isprintable():
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{mime!r} is not a MIME type",
            details={"mime": mime},
            remediation="Give a MIME type such as text/html or image/png.",
        )
    return mime


def choose_type(available: list[str], wanted: str | None) -> str | None:
    """The offered type to read: ``wanted`` (text under any of its names), or the text when None."""
    if wanted is None or is_text(wanted):
        text = next((t for t in TEXT_TYPES if t in available), None)
        if text is not None or wanted is None:
            return text
    elif wanted in available:
        return wanted
    raise DeskrigError(
        ErrorCode.UNSUPPORTED_FORMAT,
        f"the selection holds no {wanted}" + ("" if available else ": it is empty"),
        details={"mime": wanted, "available": available},
        remediation="Ask for one of details.available, or for no type to get the text.",
    )


class Clipboard:
    """The shared rules over a backend's :class:`SelectionStore`, one call at a time."""

    def __init__(self, store: SelectionStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._closed = False

    def get(self, selection: Selection, mime: str | None = None) -> ClipboardData:
        """The selection's text, or its content as ``mime``."""
        check_selection(selection)
        with self._lock:
            self._check_open()
            available = self._store.types(selection)
            chosen = choose_type(available, mime)
            data = self._store.fetch(selection, chosen) if chosen is not None else b""
        if len(data) > MAX_CLIPBOARD_BYTES:
            raise too_large(len(data))
        return ClipboardData(
            mime=TEXT_MIME if chosen is not None and is_text(chosen) else chosen,
            data=data,
            available=tuple(available),
        )

    def set(self, selection: Selection, data: bytes, mime: str = TEXT_MIME) -> None:
        """Own ``selection`` with ``data`` of type ``mime`` (text is offered under all its names)."""
        check_selection(selection)
        check_mime(mime)
        if len(data) > MAX_CLIPBOARD_BYTES:
            raise too_large(len(data))
        types = list(TEXT_TYPES) if is_text(mime) else [mime]
        with self._lock:
            self._check_open()
            self._store.offer(selection, data, types)

    def _check_open(self) -> None:
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the clipboard connection is closed")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()


class MemorySelections:
    """Selections kept in memory: the scripted desktop's (and what a paste there would read)."""

    def __init__(self) -> None:
        self.owned: dict[Selection, tuple[bytes, list[str]]] = {}

    def types(self, selection: Selection) -> list[str]:
        return list(self.owned.get(selection, (b"", []))[1])

    def fetch(self, selection: Selection, mime: str) -> bytes:
        return self.owned[selection][0]

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        self.owned[selection] = (data, list(types))

    def close(self) -> None:
        self.owned.clear()
