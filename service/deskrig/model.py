"""Data that crosses the MCP and HTTP boundary. Coordinates are screen pixels everywhere."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

ImageFormat = Literal["png", "jpeg", "webp", "bmp"]


def without_nul(value: str) -> str:
    # C strings end at NUL: argv, environment, paths and D-Bus strings cannot carry one.
    if "\0" in value:
        raise ValueError("must not contain a NUL character")
    return value


def _env_name(name: str) -> str:
    if not name or "=" in name:
        raise ValueError(f"{name!r} is not an environment variable name (empty, or contains '=')")
    return without_nul(name)


#: Text that goes to the OS or a C library (argv, environment, paths, accessibility strings).
CText = Annotated[str, AfterValidator(without_nul)]
#: An environment variable name: not empty, no '=' and no NUL.
EnvName = Annotated[str, AfterValidator(_env_name)]


class Bounds(BaseModel):
    """A rectangle in root-window (screen) pixels."""

    model_config = ConfigDict(frozen=True)

    x: int
    y: int
    width: int
    height: int

    @property
    def right(self) -> int:
        return self.x + self.width

    @property
    def bottom(self) -> int:
        return self.y + self.height

    def intersection(self, other: Bounds) -> Bounds | None:
        x0, y0 = max(self.x, other.x), max(self.y, other.y)
        x1, y1 = min(self.right, other.right), min(self.bottom, other.bottom)
        if x1 <= x0 or y1 <= y0:
            return None
        return Bounds(x=x0, y=y0, width=x1 - x0, height=y1 - y0)

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.right and self.y <= y < self.bottom


#: Displays are numbered from 1, the primary first, as in mss's monitor list (where 0 is all of them
#: together) and the screenshot servers whose tools deskrig shares.
FIRST_DISPLAY_ID = 1


class DisplayInfo(BaseModel):
    """One monitor of the desktop."""

    id: int = Field(description="Display number from 1; 1 is the primary (main) display")
    name: str
    bounds: Bounds
    primary: bool
    scale: float = Field(1.0, description="Device pixels per logical pixel")


class WindowInfo(BaseModel):
    """One top-level window."""

    id: int = Field(description="Native window id (X11 client window XID)")
    title: str
    app: str = Field(description="Application / WM_CLASS class name")
    pid: int | None
    bounds: Bounds = Field(description="Client area in screen pixels, without WM decoration")
    frame_bounds: Bounds | None = Field(None, description="Bounds including WM decoration, if any")
    minimized: bool = False
    focused: bool = False
    z_order: int = Field(0, description="Stacking position; 0 is the top-most window")


class AppInfo(BaseModel):
    """A running application that owns at least one window."""

    pid: int | None
    name: str
    windows: list[int]


class ScreenSize(BaseModel):
    width: int
    height: int


class CursorPosition(BaseModel):
    x: int
    y: int
    display_id: int | None = Field(None, description="The display (numbered from 1) the pointer is on")


class Diagnostic(BaseModel):
    """A visible fallback or degradation a backend chose (e.g. no MIT-SHM)."""

    component: str
    message: str


class TypeReport(BaseModel):
    """What ``type_text`` did: how many characters, and how they got there."""

    chars: int = Field(description="Characters typed (a CR LF pair counts as one Return)")
    remapped_keysyms: int = Field(
        0, description="Distinct characters the keyboard layout lacked, bound to spare keycodes"
    )
    path: Literal["xtest", "virtual-keyboard", "atspi", "quartz", "sendinput"] = Field(
        description="xtest: synthetic key events (X11); virtual-keyboard: a Wayland virtual keyboard "
        "(sway); atspi: inserted through the accessibility text interface; quartz: Quartz keyboard "
        "events carrying the characters (macOS); sendinput: Unicode key events (Windows)"
    )


class Point(BaseModel):
    x: int
    y: int


class PathEntry(BaseModel):
    """One step from an app's root to an element: the nth child with this role and name."""

    role: str
    name: str
    nth: int = 0


class ElementSummary(BaseModel):
    """An accessibility element an action was aimed at, as recorded in results and turns."""

    index: int | None = None
    snapshot_id: str | None = None
    role: str
    name: str
    bounds: Bounds | None = None
    path: list[PathEntry] = Field(default_factory=list, description="From the app root down to the element")


class ActionTarget(BaseModel):
    """What an action resolved to before it ran."""

    pid: int | None = None
    window_id: int | None = None
    window_title: str | None = None
    point: Point | None = None
    element: ElementSummary | None = None
    #: The window list the resolver read to find the target (None: it read none). Not part of any
    #: result: the recorder's "before" observation reuses it instead of listing the windows again.
    windows: list[WindowInfo] | None = Field(None, exclude=True)


Effect = Literal["confirmed", "unverifiable", "refused"]


class ActionResult(BaseModel):
    """Every action's result: what it did, to what, and how we know."""

    effect: Effect = Field(
        description="confirmed: read back; unverifiable: delivered but cannot be checked; refused: not done"
    )
    target: ActionTarget
    evidence: list[str] = Field(default_factory=list, description="What was checked, in order")
    detail: dict[str, object] = Field(default_factory=dict)
    screenshot: dict[str, object] | None = Field(
        None, description="After-screenshot metadata (include_screenshot)"
    )


class FileEntry(BaseModel):
    """A file of a recording as the rig's recording feed announces it (``deskrig.feed``)."""

    path: str
    size: int
    sha256: str


class TurnEvent(BaseModel):
    """One completed turn as the event feed announces it."""

    seq: int
    turn: str
    files: list[FileEntry]
