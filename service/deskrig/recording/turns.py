"""Turn folders: what one recorded action leaves on disk, and how it gets there atomically.

A turn is assembled in a hidden folder (``.turn-00001.<random>.tmp``) next to its final place and
renamed to ``turn-00001`` when every file is written, so a reader (or the event feed) never sees a
half-written turn. Files of one turn::

    action.json        tool, full arguments, result summary, error flag, pid, click point, time, duration
    action.sig         HMAC of action.json with the rig's recording key (see deskrig.recording.signing)
    evidence.json      per artifact: captured | unavailable (classification) | not_applicable (why)
    before.png         target window (full screen without one) just before the action
    after.png          ... and just after
    before_state.json  accessibility snapshot of the target app just before
    after_state.json   ... and just after
    app_state.json     the post-action snapshot (hard link to after_state.json)
    screenshot.png     compatibility alias of after.png (hard link)
    click.png          click-family actions: before.png with a red marker at the click point
    video.json         with video: which mp4 shows the turn and where (:class:`TurnVideo`)

A "before" file the action took over from the turn before (see :mod:`deskrig.recording.moments`)
is a hard link to that turn's "after" file, not written again.

Evidence classifications are stable strings (see :data:`CLASSIFICATIONS`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson
import pydantic_core
from PIL import Image
from pydantic import BaseModel, Field

from deskrig import imaging, png
from deskrig.grabs import BGRX_PIXEL, Grab
from deskrig.model import Bounds, FileEntry, Point, TurnEvent, WindowInfo
from deskrig.privacy import MaskReport
from deskrig.recording.signing import SIGNATURE_FILE, TurnSigner, recorded_mac

if TYPE_CHECKING:  # a turn's tree is read by readers that never load the accessibility modules
    from deskrig.a11y.tree import RenderedElements, Snapshot

#: Tools that get a click.png.
CLICK_TOOLS = frozenset({"click", "double_click", "right_click"})

#: Why an artifact is missing. ``unavailable``: it should exist but could not be had;
#: ``not_applicable``: it has no meaning for this turn.
CLASSIFICATIONS: dict[str, str] = {
    "capture_failed": "unavailable: the screenshot or accessibility read failed (see message)",
    "no_target_pid": "unavailable: the action has no target process to read accessibility state from",
    "a11y_unavailable": "unavailable: the app or the rig exposes no accessibility tree",
    "app_not_running": "unavailable: the target process is gone",
    "privacy_suppressed": "unavailable: the target window is blocked by the rig's security policy",
    "no_click_point": "unavailable: the click went to an element directly, without a screen point",
    "refused_before_target": "not_applicable: the call failed before its target was resolved",
    "not_a_click": "not_applicable: only click, double_click and right_click get click.png",
}

STATE_FILES = ("before_state.json", "after_state.json")
FRAME_FILES = ("before.png", "after.png")
#: alias -> the file it is a hard link of.
ALIASES = {"app_state.json": "after_state.json", "screenshot.png": "after.png"}
ARTIFACTS = (*STATE_FILES, *FRAME_FILES, *ALIASES, "click.png")
VIDEO_FILE = "video.json"

_TURN_NAME = re.compile(r"turn-(\d{5,})")
_TEMP_NAME = re.compile(r"\.turn-\d{5,}\.[0-9a-f]+\.tmp")

Status = Literal["captured", "unavailable", "not_applicable"]


class Evidence(BaseModel):
    """How one artifact of a turn came to be (or why it is missing)."""

    status: Status
    classification: str | None = None
    message: str | None = None
    source: Literal["window", "screen"] | None = None
    region: Bounds | None = None
    masked_windows: int | None = None
    #: Personal data masked in the artifact (counts per detector and engine, never the text).
    pii_masking: MaskReport | None = None
    marker: Point | None = None

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class TurnVideo(BaseModel):
    """video.json: where in the recording's video a turn's action starts."""

    path: str = Field(description="The mp4, relative to the recording folder")
    offset_s: float = Field(description="Seconds into the video at which the action started")


def captured(**facts: Any) -> Evidence:
    return Evidence(status="captured", **facts)


def unavailable(classification: str, message: str | None = None) -> Evidence:
    return Evidence(status="unavailable", classification=classification, message=message)


def not_applicable(classification: str) -> Evidence:
    return Evidence(status="not_applicable", classification=classification)


@dataclass
class TurnImage:
    """A screenshot taken for a turn (before.png, after.png); ``evidence.region`` is where ``image``
    lies on the screen. Kept as grabbed (a BGRX grab is converted and encoded on the writer thread,
    off the action's path)."""

    image: imaging.Picture | None
    evidence: Evidence
    _png: bytes | None = field(default=None, repr=False)
    #: A BGRX grab's PNG as its deflated bands, for click.png (see :meth:`marked_png`).
    _deflated: png.DeflatedFrame | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def png(self) -> bytes | None:
        """The image as PNG, encoded once: a moment still current at the next action is that
        action's "before" too (see :mod:`deskrig.recording.moments`), and is not encoded again."""
        with self._lock:
            if self._png is None and self.image is not None:
                self._png, self._deflated = png.encode_png_with_bands(self.image)
            return self._png

    def marked_png(self, marker: Point) -> bytes | None:
        """The image as PNG with the click marker centred on ``marker`` (pixels of the image), as
        :func:`deskrig.imaging.draw_click_marker` draws it. A BGRX grab's marker is drawn on RGB
        copies of the rows it covers only, and only their bands are deflated: the others are those
        of the grab's own PNG (:meth:`png`), which its grab is left as for."""
        image, whole = self.image, self.png()
        if image is None or whole is None:
            return None
        deflated = self._deflated
        if deflated is None:  # a Pillow image: the marker drawn on a copy, encoded whole
            shown = image.image() if isinstance(image, Grab) else image
            return imaging.encode(imaging.draw_click_marker(shown, marker.x, marker.y), "png")
        assert isinstance(image, Grab) and image.bgrx is not None  # deflated in bands: BGRX rows
        top, bottom = deflated.band_span(marker.y - _MARKER_REACH, marker.y + _MARKER_REACH + 1)
        if top == bottom:  # the marker lies wholly above or below the picture
            return whole
        stride = image.width * BGRX_PIXEL
        rows = memoryview(image.bgrx)[top * stride : bottom * stride]
        # Only these rows converted to RGB (the grab is before.png's, and stays as it was).
        copy = Image.frombytes("RGB", (image.width, bottom - top), rows.tobytes(), "raw", "BGRX", 0, 1)
        marked = imaging.draw_click_marker(copy, marker.x, marker.y - top)
        return deflated.with_rows(top, marked).png()


@dataclass
class TurnTree:
    """The target app's accessibility snapshot taken for a turn (before_state.json ...): the
    snapshot itself (turned into JSON on the writer thread), or JSON-ready data."""

    data: Snapshot | dict[str, Any] | None
    evidence: Evidence
    #: The tree of the moment before this one, when that was offered to it but could not be told
    #: current without reading this one (an app sends events that change nothing, such as a
    #: spinner's bounds): where the two hold the same tree, this one's file is that one's.
    same_as: TurnTree | None = field(default=None, repr=False)
    _serialised: bytes | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def json_bytes(self) -> bytes | None:
        """What the state file holds, serialised once (as :meth:`TurnImage.png`)."""
        with self._lock:
            if self._serialised is None:
                earlier, self.same_as = self.same_as, None
                if earlier is not None and _same_tree(self.data, earlier.data):
                    self._serialised = earlier.json_bytes()
                elif isinstance(self.data, dict):
                    self._serialised = _json(self.data)
                elif self.data is not None:
                    self._serialised = _state_json(self.data)
            return self._serialised


def _state_json(snapshot: Snapshot) -> bytes:
    """The snapshot's fields, its elements (one a line) and its text rendering, as JSON; the
    elements the last state file held are not serialised nor rendered again
    (:class:`~deskrig.a11y.tree.RenderedElements`)."""
    rendered = _rendered_elements().of(snapshot.elements)
    fields = snapshot.model_dump(mode="json", exclude={"elements"})
    document = {
        **fields,
        "elements": [fragment for fragment, _ in rendered],
        "text": snapshot.render_text([line for _, line in rendered]),
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


@functools.cache
def _rendered_elements() -> RenderedElements[tuple[orjson.Fragment, str]]:
    """Each element's JSON and line, for the elements of the last state file written."""
    from deskrig.a11y.tree import RenderedElements  # only a writer of trees loads the model

    return RenderedElements(
        lambda element: (orjson.Fragment(pydantic_core.to_json(element)), element.render_line())
    )


def _same_tree(one: Snapshot | dict[str, Any] | None, other: Snapshot | dict[str, Any] | None) -> bool:
    """Whether two snapshots hold the same tree (what was read, not when or how fast)."""
    if one is None or other is None or isinstance(one, dict) or isinstance(other, dict):
        return False
    return (one.pid, one.app_name, one.truncated, one.query, one.elements) == (
        other.pid,
        other.app_name,
        other.truncated,
        other.query,
        other.elements,
    )


@dataclass(frozen=True)
class Seen:
    """What a moment was taken under, to tell at the next action whether it is still current."""

    #: The target's (pid, window_id).
    target: tuple[int | None, int | None]
    #: The window list the moment was observed with.
    windows: list[WindowInfo]
    #: The desktop's damage serial, read before the pixels were grabbed (None: not read).
    damage_serial: int | None
    #: The accessibility source's events version, read before the tree was read (None: unknown).
    events: tuple[int, int] | None


@dataclass
class Moment:
    """The target as it was at one instant: screenshot and accessibility state."""

    screenshot: TurnImage
    tree: TurnTree
    #: None: the moment is not offered to the next action.
    seen: Seen | None = None


def turn_name(number: int) -> str:
    return f"turn-{number:05d}"


def turn_numbers(root: Path) -> list[int]:
    """The numbers of the complete turn folders in ``root``, ascending."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for name in names if (m := _TURN_NAME.fullmatch(name)))


def remove_stale_temps(root: Path) -> None:
    """Drop half-assembled turns a crashed process left behind (they are hidden and never renamed)."""
    for name in os.listdir(root):
        if _TEMP_NAME.fullmatch(name):
            shutil.rmtree(root / name, ignore_errors=True)


def _json(value: Any) -> bytes:
    """Indented UTF-8 JSON. pydantic-core's serializer, in Rust: the standard library's indents
    in pure Python, holding the GIL for tens of ms a turn against the actions being recorded."""
    return pydantic_core.to_json(value, indent=2, fallback=str) + b"\n"


@dataclass
class TurnRecord:
    """Everything one turn holds, before it is encoded. Shared by every recording that gets the
    turn, so the PNGs are encoded once (:meth:`contents` is memoised and thread-safe)."""

    tool: str
    action: dict[str, Any]
    #: None for a call refused before its target was resolved.
    before: Moment | None
    after: Moment | None
    click_point: Point | None
    #: Signs action.json in each folder the turn is written to (the MAC covers the turn's name).
    signer: TurnSigner | None = None
    _contents: tuple[dict[str, bytes], dict[str, str]] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def contents(self) -> tuple[dict[str, bytes], dict[str, str]]:
        """``(files, links)``: file name -> bytes, and alias -> the file it links to. Blocking."""
        with self._lock:
            if self._contents is None:
                self._contents = self._encode()
            return self._contents

    def _encode(self) -> tuple[dict[str, bytes], dict[str, str]]:
        files: dict[str, bytes] = {}
        links: dict[str, str] = {}
        evidence: dict[str, Evidence] = {}
        if self.before is None or self.after is None:
            evidence = {name: not_applicable("refused_before_target") for name in ARTIFACTS}
        else:
            for name, moment in zip(STATE_FILES, (self.before, self.after), strict=True):
                evidence[name] = moment.tree.evidence
                if (state := moment.tree.json_bytes()) is not None:
                    files[name] = state
            for name, moment in zip(FRAME_FILES, (self.before, self.after), strict=True):
                evidence[name] = moment.screenshot.evidence
                if (png := moment.screenshot.png()) is not None:
                    files[name] = png
            for alias, source in ALIASES.items():
                evidence[alias] = evidence[source]
                if source in files:
                    links[alias] = source
            evidence["click.png"] = self._click_marker(files)
        files["evidence.json"] = _json({name: evidence[name].dump() for name in ARTIFACTS})
        files["action.json"] = _json(self.action)
        return files, links

    def _click_marker(self, files: dict[str, bytes]) -> Evidence:
        assert self.before is not None
        shot = self.before.screenshot
        if self.tool not in CLICK_TOOLS:
            return not_applicable("not_a_click")
        if shot.image is None or shot.evidence.region is None:
            return shot.evidence
        if self.click_point is None:
            return unavailable("no_click_point")
        region = shot.evidence.region
        marker = Point(x=self.click_point.x - region.x, y=self.click_point.y - region.y)
        marked = shot.marked_png(marker)
        assert marked is not None  # the shot has an image
        files["click.png"] = marked
        return captured(
            source=shot.evidence.source, region=region, marker=marker, pii_masking=shot.evidence.pii_masking
        )


#: How far the click marker reaches from its centre, in pixels, each way.
_MARKER_REACH = max(imaging.MARKER_ARM, imaging.MARKER_RADIUS)


def _entry(turn: str, name: str, data: bytes) -> FileEntry:
    return FileEntry(path=f"{turn}/{name}", size=len(data), sha256=hashlib.sha256(data).hexdigest())


#: A "before" file -> the "after" file of the turn before, which holds the same bytes when the
#: action took the moment before it over (see :func:`taken_over`).
_TAKEN_OVER = {"before.png": "after.png", "before_state.json": "after_state.json"}


def after_inodes(folder: Path) -> dict[str, int]:
    """The inodes of the "after" files a turn folder was written with, to link to them only while
    they are still those files (the app under test may be able to write into the folder)."""
    inodes = {}
    for name in _TAKEN_OVER.values():
        with contextlib.suppress(OSError):
            inodes[name] = os.lstat(folder / name).st_ino
    return inodes


def taken_over(record: TurnRecord, earlier: Moment | None, inodes: Mapping[str, int]) -> dict[str, int]:
    """The "before" files of ``record`` that the turn written just before it holds as its "after"
    files, each with the inode of that file (``inodes``: :func:`after_inodes` of that turn, whose
    "after" moment was ``earlier``): the action took that moment's screenshot or tree over (the
    same objects, so the same bytes)."""
    before = record.before
    if before is None or earlier is None:
        return {}
    same = {
        "before.png": before.screenshot is earlier.screenshot,
        "before_state.json": before.tree is earlier.tree,
    }
    return {name: inodes[after] for name, after in _TAKEN_OVER.items() if same[name] and after in inodes}


def write_turn(
    root: Path,
    number: int,
    record: TurnRecord,
    video: TurnVideo | None = None,
    taken: Mapping[str, int] | None = None,
) -> TurnEvent:
    """Blocking: assemble turn ``number`` in a hidden folder and rename it into place; ``video``
    (this folder's own: each recording has its video) becomes video.json. ``taken``: "before"
    files that the turn before holds as its "after" files, with their inodes
    (:func:`taken_over`); they are hard links to those, not written again (written, should the
    link fail or the file there no longer be that inode)."""
    taken = taken or {}
    files, links = record.contents()
    if video is not None:
        files = {**files, VIDEO_FILE: _json(video.model_dump(mode="json"))}
    name = turn_name(number)
    final = root / name
    if final.exists():
        raise FileExistsError(f"{final} already exists")
    if record.signer is not None:
        previous = recorded_mac(root / turn_name(number - 1))
        files = {**files, SIGNATURE_FILE: record.signer.signature(name, previous, files["action.json"])}
    temp = root / f".{name}.{secrets.token_hex(4)}.tmp"
    temp.mkdir()
    earlier = root / turn_name(number - 1)
    try:
        for file_name, data in files.items():
            inode = taken.get(file_name)
            if inode is not None and _linked(earlier / _TAKEN_OVER[file_name], temp / file_name, inode):
                continue
            (temp / file_name).write_bytes(data)
        for alias, source in links.items():
            os.link(temp / source, temp / alias)
        os.rename(temp, final)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    entries = {file_name: _entry(name, file_name, data) for file_name, data in files.items()}
    for alias, source in links.items():  # a hard link: its source's size and digest
        entries[alias] = entries[source].model_copy(update={"path": f"{name}/{alias}"})
    return TurnEvent(seq=number, turn=name, files=[entries[n] for n in sorted(entries)])


def _linked(source: Path, link: Path, inode: int) -> bool:
    """Whether ``link`` was made a hard link of ``source``, and that is the regular file ``inode``
    (not when the earlier turn's folder was removed, or its file replaced, by a symlink too: it
    is never followed; nor where the file system has no hard links)."""
    try:
        os.link(source, link, follow_symlinks=False)
    except (OSError, NotImplementedError):  # NotImplementedError: Windows links follow symlinks
        return False
    made = os.lstat(link)
    if stat.S_ISREG(made.st_mode) and made.st_ino == inode:
        return True
    os.unlink(link)
    return False


def read_turn_event(root: Path, number: int) -> TurnEvent | None:
    """The event of a turn already on disk (written by an earlier recording), or None."""
    name = turn_name(number)
    folder = root / name
    try:
        names = sorted(n for n in os.listdir(folder) if (folder / n).is_file())
    except FileNotFoundError:
        return None
    return TurnEvent(seq=number, turn=name, files=[file_entry(root, f"{name}/{n}") for n in names])


def file_entry(root: Path, relative: str) -> FileEntry:
    """Size and sha256 of a file under ``root`` (blocking; reads it in chunks)."""
    digest = hashlib.sha256()
    size = 0
    with (root / relative).open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return FileEntry(path=relative, size=size, sha256=digest.hexdigest())
