"""Helpers shared by the recording test modules (test modules import from here, never from each
other): turn folders and elements of the GTK form, and the scripted world the video tests film."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.recording.conftest import Session

from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.model import Bounds
from deskrig.observation import Observer
from deskrig.security import WindowBlocklist

#: An element target naming a snapshot the rig never made.
STALE_ELEMENT = {"element": {"snapshot_id": "0123456789ab", "index": 3}}
#: The scripted screen: odd-sized, as a screen may be (the video is cropped to even).
SCRIPTED_SCREEN = Bounds(x=0, y=0, width=321, height=241)


async def element(s: Session, pid: int, role: str, name: str) -> dict[str, Any]:
    """``{snapshot_id, index}`` of the app's first element with ``role`` and ``name``."""
    state = await s.ok("get_app_state", {"pid": pid, "role": role, "name": name, "include_elements": True})
    return {"snapshot_id": state["snapshot_id"], "index": state["elements"][0]["index"]}


def turns(folder: Path) -> list[Path]:
    """The complete turn folders of a recording, in order."""
    return sorted(p for p in folder.iterdir() if p.name.startswith("turn-"))


def scripted_world() -> ScriptedDesktop:
    """A red "Vault" window (blocked by :func:`vault_blocked`) beside a green "Notes" one."""
    world = ScriptedDesktop(displays=[("screen", SCRIPTED_SCREEN)])
    world.add_window("Vault", Bounds(x=10, y=10, width=100, height=100), (220, 30, 30))
    world.add_window("Notes", Bounds(x=150, y=10, width=100, height=100), (30, 190, 60))
    return world


def vault_blocked(world: ScriptedDesktop) -> Observer:
    return Observer(world.open(), WindowBlocklist(["^Vault"]))


def dark(pixel: tuple[int, ...]) -> bool:
    return max(pixel[:3]) <= 24  # H.264 keeps black within a few levels of 0
