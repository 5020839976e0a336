"""MCP resources: the screen, the recording's state and its turn folders, with subscriptions.

- ``screen://current``: the whole screen as PNG, through the observation path (blocked windows
  blacked out), counted by the capture rate limit like a screenshot;
- ``recording://state``: the calling client's recording state (its session recording and the
  rig's boot recording), as JSON;
- ``turn://N``: the file list of turn N of the recording the client sees (its running session
  recording, else the boot recording), as JSON, and ``turn://N/NAME`` each file of it. Only files
  the recording announced are served, so no path leads anywhere else.

A client gets ``notifications/resources/updated`` for ``recording://state`` whenever a new turn
lands or its recording starts or stops: a session client (the initialize handshake) after
``resources/subscribe``, a stateless (2026-07-28) client on a ``subscriptions/listen`` stream that
names the URI, where ``notifications/resources/list_changed`` (the turn://N resources) can ride
too. The state, and so what is watched, is the asking client's own.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import mimetypes
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    event_to_notification,
)

from deskrig import imaging
from deskrig.error_responses import error_json
from deskrig.errors import DeskrigError
from deskrig.recording.registry import registry_or_none
from deskrig.recording.session import Recording
from deskrig.recording.watch import connection_of
from deskrig.services import Services, client_of

log = logging.getLogger(__name__)

SCREEN_URI = "screen://current"
STATE_URI = "recording://state"
TURN_SCHEME = "turn://"
#: How often a subscription looks for a new recording (one started after it subscribed).
WATCH_SECONDS = 1.0
#: Open subscriptions/listen streams a server serves at once (each watches once a second).
MAX_LISTEN_STREAMS = 64
#: Resource-not-found (the MCP spec's JSON-RPC code for resources/read of an unknown URI).
RESOURCE_NOT_FOUND = -32002


def _not_found(uri: str, why: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"no resource {uri!r}: {why}", data={"uri": uri})


class ResourceSet:
    """The resources of one server, and the subscriptions its session clients hold."""

    def __init__(self, services: Services) -> None:
        self.services = services
        #: Running watchers, by (client key, uri).
        self._watchers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._listening = 0

    def install(self, mcp: Server[Any]) -> None:
        mcp.add_request_handler("resources/list", types.PaginatedRequestParams, self.list_resources)
        mcp.add_request_handler("resources/templates/list", types.PaginatedRequestParams, self.list_templates)
        mcp.add_request_handler("resources/read", types.ReadResourceRequestParams, self.read)
        mcp.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self.subscribe)
        mcp.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self.unsubscribe)
        mcp.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, self.listen)

    def _recording(self, ctx: ServerRequestContext[Any, Any]) -> Recording | None:
        recorder = registry_or_none(self.services)
        if recorder is None:
            return None
        return recorder.shown_to(client_of(ctx).key)

    # ---- listing and reading ---------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        resources = [
            types.Resource(
                uri=SCREEN_URI,
                name="screen",
                title="The screen now",
                description="The whole screen as PNG (blocked windows blacked out)",
                mime_type="image/png",
            ),
            types.Resource(
                uri=STATE_URI,
                name="recording-state",
                title="Recording state",
                description="Your recording and the rig's boot recording (subscribe: updated per turn)",
                mime_type="application/json",
            ),
        ]
        recording = self._recording(ctx)
        events = await anyio.to_thread.run_sync(recording.events_after, 0) if recording else []
        for event in events:
            resources.append(
                types.Resource(
                    uri=f"{TURN_SCHEME}{event.seq}",
                    name=event.turn,
                    description=f"The files of {event.turn}, as JSON",
                    mime_type="application/json",
                )
            )
            for entry in event.files:
                name = entry.path.rpartition("/")[2]
                resources.append(
                    types.Resource(
                        uri=f"{TURN_SCHEME}{event.seq}/{name}",
                        name=entry.path,
                        description=f"{name} of {event.turn}",
                        mime_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
                        size=entry.size,
                    )
                )
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template="turn://{number}/{file}",
                    name="turn-file",
                    description="A file of a recorded turn (after.png, action.json ...)",
                )
            ]
        )

    async def read(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == SCREEN_URI:
            try:
                self.services.security.rate_limiter.check(client_of(ctx).identity)
                data = await anyio.to_thread.run_sync(self._screen_png)
            except DeskrigError as exc:  # the structured error, as the JSON-RPC error's data
                raise MCPError(types.INTERNAL_ERROR, exc.message, data=error_json(exc.info())) from exc
            return _blob(uri, data, "image/png")
        if uri == STATE_URI:
            return _text(uri, json.dumps(self._state(ctx)), "application/json")
        if uri.startswith(TURN_SCHEME):
            return await self._read_turn(ctx, uri)
        raise _not_found(uri, f"the resources are {SCREEN_URI}, {STATE_URI} and turn://N[/FILE]")

    def _screen_png(self) -> bytes:
        pixels = self.services.observer.observe().screen()
        return imaging.encode(pixels.frame, "png")

    def _state(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        recorder = registry_or_none(self.services)
        if recorder is None:
            return {"session": None, "boot": None}
        session = recorder.session_state(client_of(ctx).key)
        boot = recorder.boot.state() if recorder.boot is not None else None
        return {
            "session": session.model_dump(mode="json"),
            "boot": boot.model_dump(mode="json") if boot else None,
        }

    async def _read_turn(self, ctx: ServerRequestContext[Any, Any], uri: str) -> types.ReadResourceResult:
        number_text, _, name = uri.removeprefix(TURN_SCHEME).partition("/")
        if not number_text.isdigit():
            raise _not_found(uri, "a turn is turn://N with N a turn number")
        recording = self._recording(ctx)
        if recording is None:
            raise _not_found(uri, "you are not recording and the rig does not record from boot")
        number = int(number_text)
        events = await anyio.to_thread.run_sync(recording.events_after, number - 1)
        event = next((e for e in events if e.seq == number), None)
        if event is None:
            raise _not_found(uri, f"the recording has no turn {number}")
        if not name:
            listing = {"turn": event.turn, "files": [f.model_dump(mode="json") for f in event.files]}
            return _text(uri, json.dumps(listing), "application/json")
        entry = next((f for f in event.files if f.path == f"{event.turn}/{name}"), None)
        if entry is None:
            raise _not_found(uri, f"{event.turn} has no file {name!r}")
        data = await anyio.Path(recording.output_dir / entry.path).read_bytes()
        return _blob(uri, data, mimetypes.guess_type(name)[0] or "application/octet-stream")

    # ---- subscriptions ---------------------------------------------------------------------------

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        if uri != STATE_URI:
            raise MCPError(types.INVALID_PARAMS, f"only {STATE_URI} can be subscribed to", data={"uri": uri})
        connection = connection_of(ctx)
        if connection is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions need a session (the initialize handshake)")
        key = (client_of(ctx).key, uri)
        if key not in self._watchers:
            task = asyncio.get_running_loop().create_task(
                self._watch(ctx, functools.partial(ctx.session.send_resource_updated, uri))
            )
            self._watchers[key] = task
            task.add_done_callback(lambda _: self._watchers.pop(key, None))
            connection.exit_stack.callback(task.cancel)  # the client is gone
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        task = self._watchers.pop((client_of(ctx).key, str(params.uri)), None)
        if task is not None:
            task.cancel()
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): the response is the stream. Acknowledges what it
        honours (``recording://state`` among the URIs, the resource list's changes), then sends
        those whenever the client's recording state changes, until the client closes it."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs a request id")
        if self._listening >= MAX_LISTEN_STREAMS:
            raise MCPError(
                types.INTERNAL_ERROR, f"the rig serves at most {MAX_LISTEN_STREAMS} listen streams"
            )
        wanted = params.notifications
        honored = types.SubscriptionFilter(
            resources_list_changed=True if wanted.resources_list_changed else None,
            resource_subscriptions=[STATE_URI]
            if STATE_URI in (wanted.resource_subscriptions or ())
            else None,
        )
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}

        events: list[ServerEvent] = [
            *([ResourceUpdated(STATE_URI)] if honored.resource_subscriptions else []),
            *([ResourcesListChanged()] if honored.resources_list_changed else []),
        ]

        async def notify() -> None:
            for event in events:
                await ctx.session.send_notification(
                    event_to_notification(event, meta), related_request_id=subscription_id
                )

        ack = types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
        self._listening += 1
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=subscription_id
            )
            if events:
                await self._watch(ctx, notify)
            else:  # nothing of ours to send: an open stream until the client closes it
                await anyio.sleep_forever()
        finally:
            self._listening -= 1
        return types.SubscriptionsListenResult(_meta=meta)

    async def _watch(
        self, ctx: ServerRequestContext[Any, Any], notify: Callable[[], Awaitable[None]]
    ) -> None:
        """``notify`` the client whenever its recording state changes, until it unsubscribes or goes."""
        seen = self._fingerprint(ctx)
        wakeup = asyncio.Event()
        watched: Recording | None = None
        try:
            while True:
                recording = self._recording(ctx)
                if recording is not watched:
                    if watched is not None:
                        watched.wakeups.discard(wakeup)
                    if recording is not None:
                        recording.wakeups.add(wakeup)
                    watched = recording
                with anyio.move_on_after(WATCH_SECONDS):
                    await wakeup.wait()
                wakeup.clear()
                now = self._fingerprint(ctx)
                if now != seen:
                    seen = now
                    await notify()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.debug("the subscriber of %s is gone", STATE_URI)
        finally:
            if watched is not None:
                watched.wakeups.discard(wakeup)

    def _fingerprint(self, ctx: ServerRequestContext[Any, Any]) -> str:
        return json.dumps(self._state(ctx), sort_keys=True)


def _blob(uri: str, data: bytes, mime_type: str) -> types.ReadResourceResult:
    blob = base64.b64encode(data).decode("ascii")
    return types.ReadResourceResult(
        contents=[types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=blob)]
    )


def _text(uri: str, text: str, mime_type: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)]
    )
