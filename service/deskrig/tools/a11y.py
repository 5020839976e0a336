"""Accessibility state and element-level actions: ``get_app_state`` and ``set_value``."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field, field_validator, model_validator

from deskrig.a11y import Element, ElementQuery
from deskrig.a11y.tree import RenderedElements
from deskrig.capture import CaptureOptions, CaptureTarget
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionResult, ActionTarget, Effect, without_nul
from deskrig.privacy import MaskReport, masking_audit
from deskrig.services import AnyTool, CallInfo, ImagePart, Services, ToolResult, ToolSpec
from deskrig.tools.actions import ActionOptions, action_result, poll_until
from deskrig.tools.targets import ElementTarget, a11y_of, element_target
from deskrig.tools.windows import resolve_window

#: How long an element may take to show the value that was set.
SET_READ_BACK_TIMEOUT_S = 2.0


class GetAppStateInput(BaseModel):
    pid: int | None = Field(None, description="The app's process id (see list_apps)")
    window_id: int | None = Field(None, description="Or a window of the app")
    max_depth: int | None = Field(None, ge=0, description="Levels below the app root to include")
    max_elements: int | None = Field(2000, ge=1, description="Stop after this many elements; null: no limit")
    role: str | None = Field(None, description="Only elements with this role (substring, case-insensitive)")
    name: str | None = Field(None, description="Only elements with this name (substring, case-insensitive)")
    include_screenshot: bool = Field(False, description="Attach a screenshot of the app's window")
    # Off by default: an agent reads the text rendering (its lines show what the elements' data
    # holds, and actions address elements by the index they show), and the data would triple the
    # answer (gtk3-widget-factory: the text block a model is shown 21.4 kB against 69.6 kB) and
    # cost the Python SDK's client ~17 ms to check against the output schema (a check per value).
    include_elements: bool = Field(
        False,
        description="Also include each element's data (elements), for a program reading the tree; "
        "without it the compact text rendering carries the tree (each line shows the element's index, "
        "role, name, description, states, bounds, value, text and actions), a third of the answer",
    )
    mask_pii: bool | None = Field(
        None,
        description="Redact e-mail addresses, phone numbers, card numbers, IBANs and custom patterns in "
        "names and texts (and mask the screenshot). Always on when the rig's PII masking policy is on",
    )
    refresh: bool = Field(
        False,
        description="Fetch the whole tree from the app again instead of reading the live mirror "
        "(the mirror is synced with the app on every read; this is for a toolkit that misses events)",
    )

    @model_validator(mode="after")
    def _pid_or_window(self) -> GetAppStateInput:
        if (self.pid is None) == (self.window_id is None):
            raise ValueError("give pid or window_id")
        return self


class AppState(BaseModel):
    """An app's accessibility tree. Elements are addressed by ``{snapshot_id, index}`` in actions."""

    snapshot_id: str
    pid: int
    app_name: str
    element_count: int
    truncated: bool
    fetch_ms: float
    source: Literal["mirror", "fetch"] = Field(
        description="mirror: read from the live mirror (synced with the app for this call and "
        "corrected from its AT-SPI events); fetch: fetched whole from the app for this call"
    )
    tree_age_ms: float = Field(description="Age of the bulk fetch the tree descends from")
    newest_event_age_ms: float | None = Field(
        description="Age of the newest AT-SPI event of the app reflected in the tree; None when none "
        "arrived since the bulk fetch"
    )
    text: str = Field(description="Compact rendering: one line per element")
    elements: list[Element] | None = Field(
        None,
        description="Each element's data, in the text rendering's order; absent unless include_elements is true",
    )
    pii_masking: MaskReport | None = Field(
        None, description="What was redacted (counts per detector); null when not masking"
    )


#: Each element's line of the text rendering, for the elements of the last state served
#: (:class:`~deskrig.a11y.tree.RenderedElements`).
_RENDERED_LINES: RenderedElements[str] = RenderedElements(lambda element: element.render_line())
#: Each element's JSON data, for the elements of the last state served with its elements: kept
#: apart from the lines, so that an answer without them dumps none.
_ELEMENT_DATA: RenderedElements[dict[str, Any]] = RenderedElements(
    lambda element: element.model_dump(mode="json")
)


class SetValueInput(ActionOptions):
    element: ElementTarget = Field(
        description="The element to set: an entry, text view, slider or spin button"
    )
    value: str | float = Field(description="Text for editable text, a number for sliders and spin buttons")

    @field_validator("value", mode="before")
    @classmethod
    def _text_without_nul(cls, value: object) -> object:
        return without_nul(value) if isinstance(value, str) else value


async def get_app_state(services: Services, call: CallInfo, args: GetAppStateInput) -> ToolResult:
    pid = args.pid
    window = None
    observation = services.observer.observe(mask_pii=args.mask_pii)
    if args.window_id is not None:
        windows = await anyio.to_thread.run_sync(lambda: observation.windows)
        window = resolve_window(windows, args.window_id, None)
        if window.pid is None:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                "the window's process is unknown",
                details={"window_id": window.id},
            )
        pid = window.pid
    assert pid is not None
    client = await a11y_of(services).client()
    query = ElementQuery(role=args.role, name=args.name) if args.role or args.name else None
    snapshot, masked = await observation.app_tree(
        client,
        pid,
        max_depth=args.max_depth,
        max_elements=args.max_elements,
        query=query,
        refresh=args.refresh,
    )
    # The elements the last state served held are not rendered (nor dumped) again, as the
    # recorder's state files do: for gtk3-widget-factory (261 elements) a call took 3.4 ms of CPU
    # in process, against 5.8 when every element was dumped and rendered.
    lines = _RENDERED_LINES.of(snapshot.elements)
    state = AppState(
        snapshot_id=snapshot.snapshot_id,
        pid=snapshot.pid,
        app_name=snapshot.app_name,
        element_count=len(snapshot.elements),
        truncated=snapshot.truncated,
        fetch_ms=snapshot.fetch_ms,
        source=snapshot.source,
        tree_age_ms=snapshot.tree_age_ms,
        newest_event_age_ms=snapshot.newest_event_age_ms,
        text=snapshot.render_text(lines),
        elements=snapshot.elements if args.include_elements else None,
        pii_masking=masked,
    )
    fields = state.model_dump(mode="json", exclude={"elements"})
    structured_data = {
        name: _ELEMENT_DATA.of(snapshot.elements) if name == "elements" else fields[name]
        for name in AppState.model_fields
        if name in fields or (name == "elements" and args.include_elements)
    }
    images: list[ImagePart] = []
    if args.include_screenshot:
        if window is None:
            windows = await anyio.to_thread.run_sync(services.desktop.windows)
            window = next((w for w in windows if w.pid == pid and not w.minimized), None)
        if window is not None:
            target = CaptureTarget(source="window", region=window.bounds, window=window)
            metadata, data = await anyio.to_thread.run_sync(
                services.capture.run, target, CaptureOptions(mask_pii=args.mask_pii)
            )
            images.append(ImagePart(data, metadata.mime_type))
    return ToolResult(state, images=images, audit=masking_audit(masked), structured_data=structured_data)


async def resolve_set_value(services: Services, call: CallInfo, args: SetValueInput) -> ActionTarget:
    target, _ = await element_target(services, args.element, need_point=False)
    return target


def _shows(element: Element, value: str | float) -> bool:
    if element.value is not None and not isinstance(value, str):
        return abs(element.value.current - float(value)) < 1e-6
    return element.text is not None and element.text == str(value)


async def set_value(services: Services, call: CallInfo, args: SetValueInput) -> ToolResult:
    client = await a11y_of(services).client()
    _, element = await element_target(services, args.element, need_point=False)
    evidence: list[str] = []
    if element.has_interface("Value") and _is_number(args.value):
        await client.set_value(element, float(args.value))
        evidence.append(f"set Value.CurrentValue to {float(args.value):g}")
    elif element.has_interface("EditableText"):
        method = await client.set_text(element, str(args.value))
        evidence.append(f"replaced the text via EditableText.{method}")
    else:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"element {element.index} ({element.role}) has neither an editable text nor a value",
            details={"element": element.summary(), "interfaces": element.interfaces},
            remediation="Click it and use type_text, or pick an entry, text view, slider or spin button.",
        )
    expected: str | float = (
        float(args.value) if element.value is not None and _is_number(args.value) else args.value
    )
    fresh: list[Element] = []

    async def shows_value() -> bool:
        fresh[:] = [await client.read_element(element)]
        return _shows(fresh[0], expected)

    effect: Effect = "confirmed" if await poll_until(shows_value, SET_READ_BACK_TIMEOUT_S) else "unverifiable"
    if fresh:
        now = fresh[0].value.current if fresh[0].value is not None else fresh[0].text
        evidence.append(f"read back: {now!r}")
    return await action_result(services, call, args, effect, evidence)


def _is_number(value: str | float) -> bool:
    if not isinstance(value, str):
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


TOOLS: list[AnyTool] = [
    ToolSpec(
        "get_app_state",
        "The accessibility tree of an app (by pid or window) as a compact text rendering, one line per "
        "element: its index, role, name, description, states, screen bounds, text or value and actions (with "
        "include_elements, each element's data too). Use snapshot_id + index to target elements in actions.",
        GetAppStateInput,
        AppState,
        get_app_state,
        title="Read an app's accessibility tree",
    ),
    ToolSpec(
        "set_value",
        "Set an element's text (editable text) or value (slider, spin button) through accessibility, and "
        "read it back.",
        SetValueInput,
        ActionResult,
        set_value,
        read_only=False,
        resolve=resolve_set_value,
        recorded=True,
        title="Set an element's value",
    ),
]
