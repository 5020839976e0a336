"""Where an action lands: a screen point, or an accessibility element resolved to one.

Shared by the input, accessibility and app tools, so a target means the same thing everywhere.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel, Field, model_validator

from deskrig.a11y import Element, ElementQuery
from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionTarget, Bounds, ElementSummary, PathEntry, Point, WindowInfo
from deskrig.services import Services


class ElementTarget(BaseModel):
    """An element from ``get_app_state`` (``snapshot_id`` + ``index``), or a query resolved fresh
    (``role`` and/or ``name``, in the app of ``pid`` or ``window_id``; default: the focused window's app)."""

    snapshot_id: str | None = Field(None, description="snapshot_id of a get_app_state result (with index)")
    index: int | None = Field(None, ge=0, description="The element's index in that snapshot")
    role: str | None = Field(None, description="Or find the element fresh: its role, e.g. 'push button'")
    name: str | None = Field(None, description="... and/or its accessible name, e.g. 'Save'")
    pid: int | None = Field(
        None, description="With role/name: the app to search (default: the focused window's)"
    )
    window_id: int | None = Field(None, description="With role/name: or the app owning this window")

    @model_validator(mode="after")
    def _one_way(self) -> ElementTarget:
        by_ref = self.snapshot_id is not None or self.index is not None
        by_query = self.role is not None or self.name is not None
        if by_ref == by_query:
            raise ValueError("give either snapshot_id and index, or role and/or name")
        if by_ref and (self.snapshot_id is None or self.index is None):
            raise ValueError("snapshot_id and index go together")
        return self


def a11y_of(services: Services) -> A11yAccess:
    if services.a11y is None:
        raise DeskrigError(
            ErrorCode.A11Y_UNAVAILABLE,
            "accessibility is not available on this desktop",
            remediation="Start the rig with accessibility on, or use coordinates from a screenshot.",
        )
    return services.a11y


def window_at(windows: list[WindowInfo], x: int, y: int) -> WindowInfo | None:
    """The top-most window whose frame contains the point."""
    for window in windows:  # top-most first
        if not window.minimized and (window.frame_bounds or window.bounds).contains(x, y):
            return window
    return None


def focused_window(windows: list[WindowInfo]) -> WindowInfo | None:
    return next((w for w in windows if w.focused), None)


def check_on_screen(services: Services, x: int, y: int) -> Bounds:
    """Blocking: INVALID_ARGUMENT for a point off the screen."""
    screen = services.desktop.screen_bounds()
    if not screen.contains(x, y):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"point ({x}, {y}) is off the screen",
            details={"x": x, "y": y, "screen": screen.model_dump()},
            remediation="Use coordinates inside get_screen_size.",
        )
    return screen


def _point_target(services: Services, x: int, y: int) -> ActionTarget:
    check_on_screen(services, x, y)
    windows = services.desktop.windows()
    window = window_at(windows, x, y)
    return ActionTarget(
        pid=window.pid if window else None,
        window_id=window.id if window else None,
        window_title=window.title if window else None,
        point=Point(x=x, y=y),
        windows=windows,
    )


async def point_target(services: Services, x: int, y: int) -> ActionTarget:
    return await anyio.to_thread.run_sync(_point_target, services, x, y)


async def point_or_cursor_target(services: Services, x: int | None, y: int | None) -> ActionTarget:
    """(x, y), or where the pointer is when both are None."""
    if (x is None) != (y is None):
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, "x and y go together", details={"x": x, "y": y})
    if x is None or y is None:
        cursor = await anyio.to_thread.run_sync(services.desktop.cursor_position)
        return await point_target(services, cursor.x, cursor.y)
    return await point_target(services, x, y)


def _focus_target(services: Services) -> ActionTarget:
    windows = services.desktop.windows()
    window = focused_window(windows)
    if window is None:
        return ActionTarget(windows=windows)
    return ActionTarget(pid=window.pid, window_id=window.id, window_title=window.title, windows=windows)


async def focus_target(services: Services) -> ActionTarget:
    """Keyboard actions land in the focused window."""
    return await anyio.to_thread.run_sync(_focus_target, services)


def _pid_for(services: Services, target: ElementTarget) -> int:
    if target.pid is not None:
        return target.pid
    windows = services.desktop.windows()
    if target.window_id is not None:
        window = next((w for w in windows if w.id == target.window_id), None)
        if window is None:
            raise DeskrigError(
                ErrorCode.WINDOW_NOT_FOUND,
                f"no window with id {target.window_id}",
                details={"window_id": target.window_id},
            )
        if window.pid is None:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                "the window's process is unknown",
                details={"window_id": window.id},
            )
        return window.pid
    window = focused_window(windows) or (windows[0] if windows else None)
    if window is None or window.pid is None:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "no focused window to search in; give pid or window_id",
            details={"argument": "element"},
        )
    return window.pid


async def resolve_element(services: Services, target: ElementTarget) -> tuple[int, Element]:
    """The element and its app's pid; ELEMENT_NOT_FOUND / AMBIGUOUS_TARGET say why not."""
    access = a11y_of(services)
    observation = services.observer.observe()
    if target.snapshot_id is not None and target.index is not None:
        snapshot = access.snapshots.get(target.snapshot_id)
        element = access.snapshots.resolve(target.snapshot_id, target.index)
        await observation.check_app(snapshot.pid)  # a window of it may have been blocked since
        # Fresh bounds and state, and ELEMENT_NOT_FOUND if the object is gone since.
        return snapshot.pid, await (await access.client()).read_element(element)
    pid = await anyio.to_thread.run_sync(_pid_for, services, target)
    # Through the observation: an app with a blocked window is withheld, and under PII masking
    # the query matches the names the client sees (redacted), so it cannot probe for a secret.
    snapshot, _ = await observation.app_tree(await access.client(), pid, max_elements=None)
    return pid, snapshot.resolve(ElementQuery(role=target.role, name=target.name))


def summarize(element: Element, snapshot_id: str | None = None) -> ElementSummary:
    return ElementSummary(
        index=element.index,
        snapshot_id=snapshot_id,
        role=element.role,
        name=element.name,
        bounds=element.bounds,
        path=[PathEntry(role=step.role, name=step.name, nth=step.nth) for step in element.path],
    )


def visible_center(element: Element, screen: Bounds) -> Point:
    """The centre of the part of the element that is on screen."""
    if element.bounds_unknown:
        raise DeskrigError(
            ErrorCode.ELEMENT_NOT_FOUND,
            f"element {element.index} ({element.role} {element.name!r}) is showing, but where on screen "
            "is unknown: the compositor moved its popup menu where the toolkit does not say",
            details={"element": element.summary(), "reason": "bounds_unknown"},
            remediation="Reach it with the keyboard (arrow keys, then Return), or open the menu "
            "where it fits on screen.",
        )
    visible = element.bounds.intersection(screen) if element.bounds is not None else None
    if visible is None:
        raise DeskrigError(
            ErrorCode.ELEMENT_NOT_FOUND,
            f"element {element.index} ({element.role} {element.name!r}) is not showing on screen",
            details={"element": element.summary()},
            remediation="Scroll it into view or call get_app_state again.",
        )
    return Point(x=visible.x + visible.width // 2, y=visible.y + visible.height // 2)


async def element_target(
    services: Services, target: ElementTarget, *, need_point: bool
) -> tuple[ActionTarget, Element]:
    pid, element = await resolve_element(services, target)
    point = None
    window = None
    windows = None
    if need_point:
        screen = await anyio.to_thread.run_sync(services.desktop.screen_bounds)
        point = visible_center(element, screen)
        windows = await anyio.to_thread.run_sync(services.desktop.windows)
        window = window_at(windows, point.x, point.y)
    return (
        ActionTarget(
            pid=pid,
            window_id=window.id if window else None,
            window_title=window.title if window else None,
            point=point,
            element=summarize(element, target.snapshot_id),
            windows=windows,
        ),
        element,
    )
