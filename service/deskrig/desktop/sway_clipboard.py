"""The clipboard and primary selection on sway, through wl-clipboard (the Wayland data-control
protocol, ``zwlr_data_control_v1``, which sway speaks).

``wl-copy`` takes a selection and forks a child that serves it until another client takes the
selection (or sway goes); the parent exits once the selection is set, so a set returns when the
selection is ours. ``wl-paste`` reads a selection (or lists its types) and exits. One process per
call: wl-clipboard is a real external program, and a read must not block sway's other clients.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import IO

from deskrig.desktop.clipboard import Selection
from deskrig.desktop.input_limits import CLIPBOARD_TIMEOUT_S
from deskrig.desktop.sway import SwaySockets
from deskrig.errors import DeskrigError, ErrorCode

#: What wl-paste says when there is nothing to list or read (exit status 1).
_EMPTY_MESSAGES = ("Nothing is copied", "No selection")


class WaylandSelections:
    """The sway :class:`~deskrig.desktop.clipboard.SelectionStore`."""

    def __init__(self, sockets: SwaySockets) -> None:
        env = {
            k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET")
        }
        self._env = env | {"WAYLAND_DISPLAY": sockets.wayland}

    def types(self, selection: Selection) -> list[str]:
        listed = self._run("wl-paste", selection, ["--list-types"], empty_ok=True)
        return list(dict.fromkeys(line for line in listed.decode("utf-8", "replace").splitlines() if line))

    def fetch(self, selection: Selection, mime: str) -> bytes:
        return self._run("wl-paste", selection, ["--no-newline", "--type", mime])

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        # wl-copy offers a text type's other names (UTF8_STRING, STRING, text/plain ...) itself.
        with tempfile.TemporaryFile() as source:
            source.write(data)
            source.seek(0)
            self._run("wl-copy", selection, ["--type", types[0]], stdin=source)

    def _run(
        self,
        program: str,
        selection: Selection,
        args: list[str],
        *,
        empty_ok: bool = False,
        stdin: IO[bytes] | None = None,
    ) -> bytes:
        argv = [program, *(["--primary"] if selection == "primary" else []), *args]
        # Files, not pipes: wl-copy's serving child keeps what it inherits open until it ends.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                status = subprocess.run(
                    argv, stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=out, stderr=err, env=self._env,
                    timeout=CLIPBOARD_TIMEOUT_S, check=False,
                ).returncode  # fmt: skip
            except FileNotFoundError as exc:
                raise DeskrigError(
                    ErrorCode.INPUT_FAILED,
                    f"{program} is not installed",
                    remediation="Install wl-clipboard (Debian: apt install wl-clipboard).",
                ) from exc
            except subprocess.TimeoutExpired as exc:
                raise DeskrigError(
                    ErrorCode.TIMEOUT,
                    f"{program} did not finish in {CLIPBOARD_TIMEOUT_S:g} s",
                    remediation="The app owning the selection may be hung; copy again, or retry.",
                ) from exc
            out.seek(0)
            err.seek(0)
            output, message = out.read(), err.read().decode("utf-8", "replace").strip()
        if status == 0:
            return output
        if empty_ok and any(text in message for text in _EMPTY_MESSAGES):
            return b""
        raise DeskrigError(
            ErrorCode.INPUT_FAILED,
            f"{' '.join(argv)} failed with status {status}: {message}",
            details={"argv": argv, "status": status, "stderr": message[-500:]},
        )

    def close(self) -> None:
        """Nothing to release: what wl-copy serves stays until another client takes the selection
        or sway goes, as after any copy."""
