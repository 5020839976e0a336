"""What every part of the reliability suite runs against: a real rig in a subprocess.

Calls against it are made and classified in ``reliability_calls``, and tallied and reported in
``reliability_outcomes``.

A :class:`BenchRig` is ``deskrig rig run --http 127.0.0.1:PORT`` in its own session, with a private
``HOME`` (its allowed directory) and a private ``TMPDIR`` (so the ``deskrig-*`` dirs it leaves behind
are its own, not another rig's on the same machine). It binds loopback only.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskrig.procs import ProcEntry, process_family, read_proc

#: The rig's app for fuzz, load and faults: a GTK app with a large accessibility tree.
GTK_APP = ["gtk3-widget-factory"]
READY_TIMEOUT = 60.0

#: A raw JSON-RPC ``initialize`` request, for speaking HTTP to a rig without an MCP client.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "deskrig-tests", "version": "1"},
    },
}


def free_port() -> int:
    """A port that is free now, below Linux's ephemeral range (32768-60999): a port the kernel hands
    out for outgoing connections can be taken by any client between this check and the server's bind."""
    for _ in range(200):
        port = random.randrange(20000, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32767")


def rss_kib(pid: int) -> int | None:
    """Resident set size of ``pid`` from /proc (psutil is not a dependency)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


@dataclass
class BenchRig:
    """One ``deskrig rig run --http`` subprocess on loopback, with its own HOME and TMPDIR."""

    app: list[str]
    extra: list[str] = field(default_factory=list)
    token: str = field(default_factory=lambda: os.urandom(12).hex())
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="deskrig-bench-")))
    leader: ProcEntry | None = None
    #: The rig's processes as /readyz listed them once it was up: each runs in a session of its
    #: own, so they are followed by pid, not found by the runner's session.
    known: set[int] = field(default_factory=set)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def allowed(self) -> Path:
        """The rig's default allowed directory (``~/deskrig`` of its HOME)."""
        return self.home / "deskrig"

    @property
    def tmpdir(self) -> Path:
        return self.root / "tmp"

    @property
    def stderr_path(self) -> Path:
        return self.root / "rig.stderr"

    def start(self) -> BenchRig:
        # Its TMPDIR lies under this private root: a sway rig's unprivileged user must pass through it
        # to the runtime dir the rig makes there.
        self.root.chmod(0o711)
        self.allowed.mkdir(parents=True)
        self.tmpdir.mkdir()
        deskrig = str(Path(sys.executable).parent / "deskrig")
        argv = [deskrig, "rig", "run", "--http", f"127.0.0.1:{self.port}", "--token", self.token]
        argv += [*self.extra, "--", *self.app]
        env = {**os.environ, "HOME": str(self.home), "TMPDIR": str(self.tmpdir)}
        with self.stderr_path.open("wb") as stderr:
            # Its own session: the rig's whole family is found by session id after a kill -9.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
        self.leader = read_proc(self.proc.pid)
        self.wait_ready()
        self.known.update(self.pids().values())
        return self

    def readyz(self, token: bool = True) -> tuple[int, dict[str, Any]] | None:
        """(status, body) of ``/readyz``, or None when nothing answers."""
        headers = {"Authorization": f"Bearer {self.token}"} if token else {}
        request = urllib.request.Request(f"{self.base}/readyz", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 503 while not ready; its body says why
            body = json_or_none(exc.read().decode(errors="replace"))
            return exc.code, body if isinstance(body, dict) else {}
        except (OSError, ValueError):
            return None

    def wait_ready(self) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the rig exited with {self.proc.returncode}:\n{self.stderr_tail()}")
            answer = self.readyz()
            if answer is not None and answer[0] == 200:
                return answer[1]
            time.sleep(0.1)
        raise RuntimeError(f"the rig was not ready within {READY_TIMEOUT:g} s:\n{self.stderr_tail()}")

    def pids(self) -> dict[str, int]:
        """Process name -> pid as the rig started them (xvfb, wm, dbus, at-spi, app), plus the server."""
        answer = self.readyz()
        assert self.proc is not None
        named = {} if answer is None else answer[1].get("details", {}).get("pids", {})
        if not named:
            raise RuntimeError(f"the rig's /readyz lists no pids (answer: {answer})")
        return {"server": self.proc.pid, **{str(k): int(v) for k, v in named.items()}}

    def app_pid(self) -> int:
        return self.pids()["app"]

    def server_rss_kib(self) -> int | None:
        assert self.proc is not None
        return rss_kib(self.proc.pid)

    def stderr_tail(self, lines: int = 15) -> str:
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def family(self) -> dict[int, ProcEntry]:
        """Live processes of this rig: the runner's session, its known processes, their descendants."""
        if self.leader is None:
            return {}
        family = process_family(self.leader, self.known)
        self.known.update(family)
        return family

    def leftover_dirs(self) -> list[str]:
        """``deskrig-*`` dirs the rig left in its TMPDIR."""
        if not self.tmpdir.exists():
            return []
        return sorted(p.name for p in self.tmpdir.iterdir() if p.name.startswith("deskrig-"))

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the runner if it still runs; its exit status (None if it had to be killed)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def stop_and_leftovers(self) -> tuple[int | None, list[str]]:
        """Stop the rig; its exit status and the processes of its family still alive a second later."""
        status = self.stop()
        time.sleep(1.0)  # death signals reach the children
        return status, [describe_process(pid) for pid in self.family()]

    def cleanup(self) -> None:
        """Stop the rig, SIGKILL whatever of its family is still alive, and remove its dirs."""
        if self.proc is not None:
            self.stop()
        for pid in self.family():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def describe_process(pid: int) -> str:
    try:
        return f"{Path(f'/proc/{pid}/comm').read_text().strip()} ({pid})"
    except OSError:
        return str(pid)


def json_or_none(text: str | None) -> Any:
    """``text`` parsed as JSON, or None when it is missing or is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
