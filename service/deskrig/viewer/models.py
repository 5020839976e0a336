"""What the viewer reads from a recording folder, and what it makes of each turn.

The files' own models are reused where the recorder has them (:class:`~deskrig.recording.turns.Evidence`,
:class:`~deskrig.recording.turns.TurnVideo`, :class:`~deskrig.errors.ErrorInfo`); action.json and
the accessibility snapshots are read through the models below, which name the fields the recorder
writes (``RecordingRegistry._action`` and :class:`deskrig.a11y.tree.Snapshot`'s JSON) and ignore
any others, so a recording from a newer rig still opens.
"""

from __future__ import annotations

from datetime import datetime
from typing import (
    Any,
    Literal,
    NotRequired,  # pydantic needs these before Python 3.12
)

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

from deskrig.errors import ErrorInfo
from deskrig.model import Point
from deskrig.recording.turns import Evidence, TurnVideo


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RecordedAction(_Lenient):
    """action.json: the call, its result or error, its target, when and how long."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] | None = None
    is_error: bool = False
    error: ErrorInfo | None = None
    pid: int | None = None
    window_id: int | None = None
    window_title: str | None = None
    click_point: Point | None = None
    timestamp: datetime
    duration_ms: float = 0.0
    client_id: str | None = None

    @property
    def effect(self) -> str | None:
        """An action's ``effect`` (confirmed, unverifiable, refused: :class:`deskrig.model.ActionResult`)."""
        effect = (self.result or {}).get("effect")
        return effect if isinstance(effect, str) else None

    @property
    def effect_evidence(self) -> list[str]:
        """What the action checked to call its effect, in order."""
        evidence = (self.result or {}).get("evidence")
        return [str(line) for line in evidence] if isinstance(evidence, list) else []


# The snapshots are most of a recording's bytes: they are read as typed dicts, which pydantic-core
# validates three times faster than it makes a model instance per element (1,000 turns of 150
# elements: 0.3 s instead of 1 s). Absent optional keys mean the defaults the recorder leaves out:
# name "", states [], text and value None.


@with_config(ConfigDict(extra="ignore"))
class RecordedValue(TypedDict):
    """The Value interface of a recorded element (:class:`deskrig.a11y.tree.ValueInfo`): the current value."""

    current: float


@with_config(ConfigDict(extra="ignore"))
class RecordedElement(TypedDict):
    """One element of a recorded accessibility snapshot (``before_state.json`` ...)."""

    index: int
    parent: int | None
    role: str
    name: NotRequired[str]
    states: NotRequired[list[str]]
    text: NotRequired[str | None]
    value: NotRequired[RecordedValue | None]


@with_config(ConfigDict(extra="ignore"))
class RecordedState(TypedDict):
    """A recorded accessibility snapshot of the target app."""

    elements: NotRequired[list[RecordedElement]]


RECORDED_STATE = TypeAdapter(RecordedState)


ChangeKind = Literal["added", "removed", "renamed", "states", "text", "value"]


class A11yChange(BaseModel):
    """One difference between the before and after snapshots of a turn."""

    kind: ChangeKind
    role: str
    #: The element's name (after, except for ``removed``).
    name: str
    #: Readable ancestry, e.g. ``frame "Form" > filler``.
    where: str = ""
    before: str | None = None
    after: str | None = None

    def describe(self) -> str:
        element = f'{self.role} "{self.name}"' if self.name else self.role
        if self.kind in ("added", "removed"):
            return f"{self.kind} {element}"
        return f"{element}: {self.kind} {self.before!r} → {self.after!r}"


class A11yDiff(BaseModel):
    """What changed in the target's accessibility tree across a turn; ``note`` says why there is
    no diff (a snapshot missing)."""

    changes: list[A11yChange] = Field(default_factory=list)
    note: str | None = None


class Marker(BaseModel):
    """The click point as a fraction of the before image (0..1 each way)."""

    x: float
    y: float


class TurnView(BaseModel):
    """One turn as the report and the exports show it. Paths are relative to the recording folder."""

    number: int
    folder: str
    action: RecordedAction
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    before: str | None = None
    after: str | None = None
    marker: Marker | None = None
    diff: A11yDiff = Field(default_factory=A11yDiff)
    video: TurnVideo | None = None
    #: Why the folder could not be read in full (a damaged file), if it could not.
    problem: str | None = None


class RecordingView(BaseModel):
    """A recording folder: its turns, oldest first, and its videos."""

    title: str
    turns: list[TurnView]
    videos: list[str] = Field(default_factory=list)
