"""What loads on Windows, checked on Linux in fresh interpreters made to look like Windows' in what
matters at import time.

- The MCP server builds without the Linux-only dependencies (pip installs none of them there) and
  the accessibility tools answer A11Y_UNAVAILABLE, over the scripted desktop.
- The command line (and every module it and the server import) loads without the POSIX-only
  names Windows' ``os``, ``signal`` and stdlib lack: a default argument or module constant
  naming one fails at import there (``signal.SIGKILL``, ``ctypes.CDLL(None)`` did).

The Windows backend itself runs in tests/native/test_windows_host.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVE_OVER_THE_SCRIPTED_DESKTOP = """
import anyio
from mcp import Client

from deskrig.config import Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.serving import build_server


async def main() -> None:
    server = build_server(ScriptedDesktop().open(), Settings())
    async with Client(server.mcp, mode="legacy") as client:
        tools = await client.list_tools()
        state = await client.call_tool("get_app_state", {"pid": 1})
    server.services.desktop.close()
    server.services.security.close()
    print(json.dumps({"tools": len(tools.tools), "error": state.is_error, "content": state.content[0].text}))


anyio.run(main)
"""


#: Makes the interpreter look like Windows' to module-level code: the stdlib and the dependencies
#: load first, as they are (their own platform code is theirs), then ``sys.platform`` says win32
#: and the POSIX-only names and modules Windows lacks are taken away.
LIKE_WINDOWS = """
import asyncio, concurrent.futures, ctypes, json, logging, mimetypes, os, shutil, signal, socket
import subprocess, sys, tempfile, uuid
import anyio, docker, fastapi, isal, mcp, mss, PIL.Image, pydantic, rich, starlette, uvicorn
sys.platform = "win32"
for missing in ("pwd", "grp", "fcntl", "resource", "termios", "dbus_fast", "Xlib", "i3ipc", "pywayland"):
    sys.modules[missing] = None
for name in ("SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGPIPE", "SIGALRM",
             "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGWINCH"):
    delattr(signal, name)
for name in ("getuid", "geteuid", "getgid", "getegid", "setsid", "killpg", "fchmod", "fork",
             "setpriority", "sysconf", "getloadavg", "sched_getaffinity", "O_NOFOLLOW", "O_NONBLOCK",
             "O_CLOEXEC", "memfd_create", "getpgid", "setpgid", "chown", "seteuid"):
    if hasattr(os, name):
        delattr(os, name)
cdll_init = ctypes.CDLL.__init__
def no_libc(self, name, *args, **kwargs):
    if name is None:
        raise TypeError("Windows has no C library to load by no name")
    cdll_init(self, name, *args, **kwargs)
ctypes.CDLL.__init__ = no_libc
"""

IMPORT_THE_COMMAND_LINE = """
import importlib
from deskrig.cli import build_parser
build_parser()
for name in ("deskrig.serving", "deskrig.server", "deskrig.http", "deskrig.tools", "deskrig.launcher",
             "deskrig.recording", "deskrig.desktop", "deskrig.desktop.windows_keys"):
    importlib.import_module(name)
print("imported")
"""


def run_python(*parts: str) -> subprocess.CompletedProcess[str]:
    script = "\n".join(parts)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_the_command_line_imports_without_posix_only_names() -> None:
    result = run_python(LIKE_WINDOWS, IMPORT_THE_COMMAND_LINE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("imported")


def test_the_server_builds_and_answers_without_the_linux_only_packages() -> None:
    result = run_python(LIKE_WINDOWS, SERVE_OVER_THE_SCRIPTED_DESKTOP)
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["tools"] > 20
    assert answer["error"] and "A11Y_UNAVAILABLE" in answer["content"]
