"""Pointer and keyboard actions: click, drag, scroll, type, keys. Targets are screen points or
accessibility elements; every result says what was confirmed and how."""

from __future__ import annotations

from typing import Literal

import anyio
from pydantic import BaseModel, Field, model_validator

from deskrig.a11y import Element
from deskrig.errors import DeskrigError
from deskrig.model import ActionResult, ActionTarget, CursorPosition, Effect, Point
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools.actions import ActionOptions, action_result, poll_until
from deskrig.tools.input_device import deliver, deliver_then, run_input
from deskrig.tools.targets import (
    ElementTarget,
    a11y_of,
    check_on_screen,
    element_target,
    focus_target,
    point_or_cursor_target,
    point_target,
)

Button = Literal["left", "right", "middle"]
BUTTON = "Mouse button: left, right or middle"
MODIFIERS = "Keys held down meanwhile, e.g. ['ctrl'] or ['shift', 'alt']"
#: How long a typed text may take to show up in the app's accessibility tree.
READ_BACK_TIMEOUT_S = 1.5


class PointerTargetInput(ActionOptions):
    x: int | None = Field(None, description="Screen x; or give element")
    y: int | None = Field(None, description="Screen y; or give element")
    element: ElementTarget | None = Field(
        None, description="Target the centre of this element's visible bounds"
    )

    @model_validator(mode="after")
    def _point_or_element(self) -> PointerTargetInput:
        has_point = self.x is not None or self.y is not None
        if has_point == (self.element is not None):
            raise ValueError("give x and y, or element")
        if has_point and (self.x is None or self.y is None):
            raise ValueError("x and y go together")
        return self


class ClickInput(PointerTargetInput):
    button: Button = Field("left", description=BUTTON)
    count: int = Field(1, ge=1, le=10, description="Number of clicks")
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)


class DoubleClickInput(PointerTargetInput):
    button: Button = Field("left", description=BUTTON)
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)


class RightClickInput(PointerTargetInput):
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)


class MoveInput(ActionOptions):
    x: int = Field(description="Screen x to move the pointer to")
    y: int = Field(description="Screen y to move the pointer to")


class DragInput(ActionOptions):
    from_x: int = Field(description="Screen x where the button is pressed")
    from_y: int = Field(description="Screen y where the button is pressed")
    to_x: int = Field(description="Screen x where the button is released")
    to_y: int = Field(description="Screen y where the button is released")
    button: Button = Field("left", description=BUTTON)
    duration_ms: int = Field(300, ge=0, le=60_000, description="How long the move from start to end takes")
    steps: int = Field(10, ge=1, le=1000, description="Intermediate pointer positions along the way")


class ScrollInput(ActionOptions):
    x: int | None = Field(None, description="Screen x to scroll at; default: where the pointer is")
    y: int | None = Field(None, description="Screen y to scroll at (with x); default: where the pointer is")
    direction: Literal["up", "down", "left", "right"] = Field(description="Which way to turn the wheel")
    amount: int = Field(3, ge=1, le=50, description="Wheel steps")


class TypeTextInput(ActionOptions):
    text: str = Field(description="Any Unicode text; \\n presses Return and \\t Tab")
    delay_ms: int = Field(0, ge=0, le=1000, description="Pause between characters")
    element: ElementTarget | None = Field(None, description="Click this element first to focus it")


class PressKeyInput(ActionOptions):
    key: str = Field(description="A key or combination: Return, ctrl+s, F5, shift+Tab")
    modifiers: list[str] = Field(default_factory=list, description=MODIFIERS)


class HotkeyInput(ActionOptions):
    keys: list[str] = Field(description="Two or more keys pressed together, e.g. ['ctrl', 'a']")


# -- resolvers: where each action lands, found before it runs ------------------------------------


async def resolve_pointer(services: Services, call: CallInfo, args: PointerTargetInput) -> ActionTarget:
    if args.element is not None:
        target, _ = await element_target(services, args.element, need_point=True)
        return target
    assert args.x is not None and args.y is not None
    return await point_target(services, args.x, args.y)


async def resolve_move(services: Services, call: CallInfo, args: MoveInput) -> ActionTarget:
    return await point_target(services, args.x, args.y)


async def resolve_drag(services: Services, call: CallInfo, args: DragInput) -> ActionTarget:
    await anyio.to_thread.run_sync(check_on_screen, services, args.to_x, args.to_y)
    return await point_target(services, args.from_x, args.from_y)


async def resolve_scroll(services: Services, call: CallInfo, args: ScrollInput) -> ActionTarget:
    return await point_or_cursor_target(services, args.x, args.y)


async def resolve_typing(services: Services, call: CallInfo, args: TypeTextInput) -> ActionTarget:
    if args.element is not None:
        target, _ = await element_target(services, args.element, need_point=True)
        return target
    return await focus_target(services)


async def resolve_keys(services: Services, call: CallInfo, args: BaseModel) -> ActionTarget:
    return await focus_target(services)


# -- handlers ---------------------------------------------------------------------------------


def _point(call: CallInfo) -> Point:
    assert call.target is not None and call.target.point is not None
    return call.target.point


def _pointer_evidence(cursor: CursorPosition, point: Point) -> list[str]:
    landed = (cursor.x, cursor.y) == (point.x, point.y)
    return [
        f"pointer read back at ({cursor.x}, {cursor.y})" + ("" if landed else f", not ({point.x}, {point.y})")
    ]


async def _click(
    services: Services,
    call: CallInfo,
    args: PointerTargetInput,
    button: Button,
    count: int,
    modifiers: list[str],
) -> ToolResult:
    point = _point(call)
    cursor = await deliver_then(
        services,
        call,
        services.desktop.cursor_position,
        lambda d, *a: d.button(*a),
        point.x,
        point.y,
        button,
        count,
        modifiers,
    )
    evidence = [
        f"{button} button x{count} delivered at ({point.x}, {point.y})",
        *_pointer_evidence(cursor, point),
    ]
    if call.target and call.target.window_title:
        evidence.append(f"window under the point: {call.target.window_title!r}")
    return await action_result(services, call, args, "unverifiable", evidence)


async def click(services: Services, call: CallInfo, args: ClickInput) -> ToolResult:
    return await _click(services, call, args, args.button, args.count, args.modifiers)


async def double_click(services: Services, call: CallInfo, args: DoubleClickInput) -> ToolResult:
    return await _click(services, call, args, args.button, 2, args.modifiers)


async def right_click(services: Services, call: CallInfo, args: RightClickInput) -> ToolResult:
    return await _click(services, call, args, "right", 1, args.modifiers)


async def move_cursor(services: Services, call: CallInfo, args: MoveInput) -> ToolResult:
    cursor = await deliver_then(
        services, call, services.desktop.cursor_position, lambda d, *a: d.move(*a), args.x, args.y
    )
    effect: Effect = "confirmed" if (cursor.x, cursor.y) == (args.x, args.y) else "unverifiable"
    return await action_result(
        services, call, args, effect, [f"pointer read back at ({cursor.x}, {cursor.y})"]
    )


async def drag(services: Services, call: CallInfo, args: DragInput) -> ToolResult:
    cursor = await deliver_then(
        services,
        call,
        services.desktop.cursor_position,
        lambda d, *a: d.drag(*a),
        (args.from_x, args.from_y),
        (args.to_x, args.to_y),
        args.button,
        args.duration_ms,
        args.steps,
    )
    evidence = [
        f"dragged {args.button} from ({args.from_x}, {args.from_y}) to ({args.to_x}, {args.to_y}) in {args.steps} steps"
    ]
    evidence += _pointer_evidence(cursor, Point(x=args.to_x, y=args.to_y))
    return await action_result(services, call, args, "unverifiable", evidence)


async def scroll(services: Services, call: CallInfo, args: ScrollInput) -> ToolResult:
    point = _point(call)
    await deliver(services, call, lambda d, *a: d.scroll(*a), point.x, point.y, args.direction, args.amount)
    evidence = [f"{args.amount} wheel step(s) {args.direction} at ({point.x}, {point.y})"]
    return await action_result(services, call, args, "unverifiable", evidence)


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


async def _focused_text(services: Services, pid: int) -> tuple[str, Element | None]:
    """The name of the platform's accessibility API, and the focused element if it has text."""
    client = await a11y_of(services).client()
    element = await client.focused_element(pid)
    return client.name, element if element is not None and element.text is not None else None


async def type_text(services: Services, call: CallInfo, args: TypeTextInput) -> ToolResult:
    target = call.target or ActionTarget()
    evidence: list[str] = []
    if args.element is not None:
        point = _point(call)
        await deliver(services, call, lambda d, *a: d.button(*a), point.x, point.y, "left", 1, [])
        evidence.append(f"clicked element at ({point.x}, {point.y}) to focus it")
    report = await run_input(
        services,
        call,
        lambda device, job: device.type_text(args.text, args.delay_ms, job),
        total=len(args.text),
        unit="characters typed",
    )
    evidence.append(f"typed {len(args.text)} characters via {report.path} ({report.model_dump_json()})")
    effect: Effect = "unverifiable"
    if target.pid is not None and services.a11y is not None:
        wanted = _normalize(args.text)
        seen: list[str] = []
        read_through = ""

        async def landed() -> bool:
            nonlocal read_through
            try:
                read_through, element = await _focused_text(services, target.pid)  # type: ignore[arg-type]
            except DeskrigError:
                return False
            if element is None:
                return False
            seen[:] = [_normalize(element.text or "")]
            return wanted in seen[0]

        if await poll_until(landed, READ_BACK_TIMEOUT_S):
            effect = "confirmed"
            evidence.append(
                f"the focused element's text contains the typed text (read back through {read_through})"
            )
        else:
            evidence.append(
                "could not read the typed text back" + (f"; the focused text is {seen[0]!r}" if seen else "")
            )
    return await action_result(services, call, args, effect, evidence, path=report.path)


async def press_key(services: Services, call: CallInfo, args: PressKeyInput) -> ToolResult:
    await deliver(services, call, lambda d, *a: d.press_key(*a), args.key, args.modifiers)
    combo = "+".join([*args.modifiers, args.key])
    return await action_result(services, call, args, "unverifiable", [f"pressed {combo}"])


async def hotkey(services: Services, call: CallInfo, args: HotkeyInput) -> ToolResult:
    await deliver(services, call, lambda d, *a: d.hotkey(*a), args.keys)
    return await action_result(
        services, call, args, "unverifiable", [f"pressed {'+'.join(args.keys)} together"]
    )


def action_tool(
    name: str,
    description: str,
    model: type[BaseModel],
    handler: object,
    resolve: object,
    *,
    title: str,
    destructive: bool = True,
) -> AnyTool:
    """A recorded action's spec (every input tool, and the held-input halves)."""
    return ToolSpec(
        name,
        description,
        model,
        ActionResult,
        handler,  # type: ignore[arg-type]
        read_only=False,
        resolve=resolve,  # type: ignore[arg-type]
        recorded=True,
        title=title,
        destructive=destructive,
    )


TOOLS: list[AnyTool] = [
    action_tool(
        "click",
        "Click at a screen point or on an element (the centre of its visible bounds).",
        ClickInput,
        click,
        resolve_pointer,
        title="Click",
    ),
    action_tool(
        "double_click",
        "Double-click at a point or on an element.",
        DoubleClickInput,
        double_click,
        resolve_pointer,
        title="Double-click",
    ),
    action_tool(
        "right_click",
        "Right-click at a point or on an element (opens context menus).",
        RightClickInput,
        right_click,
        resolve_pointer,
        title="Right-click",
    ),
    action_tool(
        "move_cursor",
        "Move the mouse pointer to a screen point.",
        MoveInput,
        move_cursor,
        resolve_move,
        title="Move the pointer",
        destructive=False,
    ),
    action_tool(
        "drag",
        "Press a button at one point, move to another and release.",
        DragInput,
        drag,
        resolve_drag,
        title="Drag",
    ),
    action_tool(
        "scroll",
        "Turn the mouse wheel at a point (default: where the pointer is).",
        ScrollInput,
        scroll,
        resolve_scroll,
        title="Scroll",
        destructive=False,
    ),
    action_tool(
        "type_text",
        "Type any Unicode text into the focused window (or click an element first). Characters the "
        "keyboard layout lacks are mapped onto spare keys; the result says which path was used.",
        TypeTextInput,
        type_text,
        resolve_typing,
        title="Type text",
    ),
    action_tool(
        "press_key",
        "Press a key or combination such as Return, ctrl+s, F5, shift+Tab.",
        PressKeyInput,
        press_key,
        resolve_keys,
        title="Press a key",
    ),
    action_tool(
        "hotkey",
        "Press two or more keys together, e.g. ['ctrl', 'a'].",
        HotkeyInput,
        hotkey,
        resolve_keys,
        title="Press keys together",
    ),
]
