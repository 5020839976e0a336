"""Halves of input: key_down / key_up and mouse_down / mouse_up, for holding a modifier while
clicking or a button while moving. The desktop's books (``deskrig.desktop.held``) say who holds
what, and release it when its client goes."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from pydantic import Field, model_validator

from deskrig.desktop.held import HeldInput, HeldState
from deskrig.model import ActionTarget
from deskrig.services import AnyTool, CallInfo, Services, ToolResult
from deskrig.tools.actions import ActionOptions, action_result
from deskrig.tools.input import BUTTON, Button, action_tool, resolve_keys
from deskrig.tools.targets import point_or_cursor_target

#: HeldInput.mouse_down or mouse_up: (books, holder, button, x, y, lock timeout).
MouseChange = Callable[[HeldInput, str, str, int | None, int | None, float | None], HeldState]
KEY = (
    "One key: a modifier (shift, ctrl, alt, super), a named key (Return, F5, Left) or a character "
    "key of the layout (a, 1)"
)


class KeyInput(ActionOptions):
    key: str = Field(description=KEY)


class MouseInput(ActionOptions):
    button: Button = Field("left", description=BUTTON)
    x: int | None = Field(
        None, description="Screen x to move to first (with y); default: where the pointer is"
    )
    y: int | None = Field(None, description="Screen y to move to first (with x)")

    @model_validator(mode="after")
    def _both_or_neither(self) -> MouseInput:
        if (self.x is None) != (self.y is None):
            raise ValueError("x and y go together")
        return self


async def resolve_mouse(services: Services, call: CallInfo, args: MouseInput) -> ActionTarget:
    return await point_or_cursor_target(services, args.x, args.y)


async def _held(
    services: Services,
    call: CallInfo,
    args: ActionOptions,
    change: Callable[[HeldInput, float], HeldState],
    did: str,
) -> ToolResult:
    held = services.desktop.held
    state = await anyio.to_thread.run_sync(change, held, services.settings.input_lock_timeout)
    holding = [*state.keys, *state.buttons]
    evidence = [did, "now held by you: " + (", ".join(holding) if holding else "nothing")]
    detail = {"held_keys": list(state.keys), "held_buttons": list(state.buttons)}
    return await action_result(services, call, args, "unverifiable", evidence, **detail)


async def key_down(services: Services, call: CallInfo, args: KeyInput) -> ToolResult:
    return await _held(
        services, call, args, lambda h, t: h.key_down(call.client_id, args.key, t), f"pressed {args.key}"
    )


async def key_up(services: Services, call: CallInfo, args: KeyInput) -> ToolResult:
    return await _held(
        services, call, args, lambda h, t: h.key_up(call.client_id, args.key, t), f"released {args.key}"
    )


async def mouse_down(services: Services, call: CallInfo, args: MouseInput) -> ToolResult:
    return await _mouse(services, call, args, HeldInput.mouse_down, "pressed")


async def mouse_up(services: Services, call: CallInfo, args: MouseInput) -> ToolResult:
    return await _mouse(services, call, args, HeldInput.mouse_up, "released")


async def _mouse(
    services: Services, call: CallInfo, args: MouseInput, change: MouseChange, did: str
) -> ToolResult:
    return await _held(
        services,
        call,
        args,
        lambda h, t: change(h, call.client_id, args.button, args.x, args.y, t),
        f"{did} the {args.button} button{_where(call)}",
    )


def _where(call: CallInfo) -> str:
    point = call.target.point if call.target is not None else None
    return f" at ({point.x}, {point.y})" if point is not None else ""


_HELD_UNTIL = (
    " It stays down until the matching release, or until this client disconnects, its session "
    "ends, or (stateless clients) it makes no call for the rig's held_input_idle_timeout."
)


def _half(
    name: str, title: str, description: str, model: type[ActionOptions], handler: object, resolve: object
) -> AnyTool:
    return action_tool(name, description, model, handler, resolve, title=title)


TOOLS: list[AnyTool] = [
    _half(
        "key_down",
        "Hold a key down",
        "Press a key and keep it held, e.g. shift for a shift-click." + _HELD_UNTIL,
        KeyInput,
        key_down,
        resolve_keys,
    ),
    _half(
        "key_up",
        "Release a held key",
        "Release a key you held with key_down (a key you do not hold is INVALID_ARGUMENT).",
        KeyInput,
        key_up,
        resolve_keys,
    ),
    _half(
        "mouse_down",
        "Hold a mouse button down",
        "Press a mouse button (at x, y or where the pointer is) and keep it held; move_cursor then "
        "drags." + _HELD_UNTIL,
        MouseInput,
        mouse_down,
        resolve_mouse,
    ),
    _half(
        "mouse_up",
        "Release a held mouse button",
        "Release a mouse button you held with mouse_down (after moving to x, y if given).",
        MouseInput,
        mouse_up,
        resolve_mouse,
    ),
]
