"""The declarative tool record and what a handler gets to work with, below the tools and the
recorder that both use it (see the layers in pyproject.toml's ``[tool.importlinter]``).

A tool is a :class:`ToolSpec`: name, description, a pydantic input model (the only schema), an
output model, annotations, the profile it belongs to and a handler. Handlers are plain async
functions over :class:`Services`; they raise :class:`~deskrig.errors.DeskrigError` and never
format protocol errors themselves: ``deskrig.server`` does that in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from pydantic import BaseModel

from deskrig.a11y.access import A11yAccess
from deskrig.capture import CapturePipeline
from deskrig.config import Settings
from deskrig.desktop import Desktop
from deskrig.errors import ErrorInfo
from deskrig.identity import ANONYMOUS_IDENTITY, SCOPE_KEY, STDIO_IDENTITY, ClientRef
from deskrig.launcher import AppLauncher, SubprocessLauncher
from deskrig.model import ActionTarget
from deskrig.observation import Observer
from deskrig.privacy import PiiMasker
from deskrig.security import SecurityContext

Profile = Literal["default", "acs"]
InputT = TypeVar("InputT", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class ImagePart:
    """An image to send as MCP image content."""

    data: bytes
    mime_type: str


@dataclass(frozen=True)
class ResourcePart:
    """Bytes to send as an MCP embedded resource (a file's contents)."""

    uri: str
    data: bytes
    mime_type: str


@dataclass(frozen=True)
class ToolResult:
    """What a handler returns: structured data (the tool's output model), optional images and
    embedded resources."""

    structured: BaseModel
    images: list[ImagePart] = field(default_factory=list)
    resources: list[ResourcePart] = field(default_factory=list)
    #: Facts for the call's audit line (e.g. ``pii_masking`` counts; never masked text).
    audit: dict[str, Any] = field(default_factory=dict)
    #: ``structured`` as JSON data, when the handler has it already (get_app_state keeps its
    #: elements' JSON from call to call): what ``structured.model_dump(mode="json")`` would give.
    structured_data: dict[str, Any] | None = None


#: Reports progress on the current call: (progress, total, message), as MCP progress notifications.
ProgressReporter = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class CallInfo:
    """Who is calling and, for an action, the target its resolver found before it ran.

    The rate limiter keys on ``client.identity``; recordings, held input and the audit log on
    ``client_id`` (the identity plus the MCP session, where there is one).
    """

    client: ClientRef
    target: ActionTarget | None = None
    #: Set when the client asked for progress (sent a progressToken).
    progress: ProgressReporter | None = None
    #: Whether the client has gone (its HTTP request closed); None when the transport cannot tell.
    disconnected: Callable[[], Awaitable[bool]] | None = None
    #: The call path this call came in by, for a tool that runs other tools (replay_trajectory).
    via: CallPath | None = None
    #: The transport serves one client (stdio): a quick blocking step (:func:`run_blocking`) runs
    #: on the event loop, which has nothing else to serve meanwhile, without a worker thread.
    one_client: bool = False

    @property
    def client_id(self) -> str:
        return self.client.key


async def run_blocking(call: CallInfo, work: Callable[[], T], *, quick: bool = True) -> T:
    """``work()``, which blocks (X calls, encoding): in a worker thread, or, when ``quick`` (a few
    milliseconds at most, and never waiting for the event loop) and the call's transport serves one
    client, right here. The hop cost the event loop about 0.13 ms of CPU a call (measured in a
    stdio server under load) and the client a thread wake-up; over HTTP, other clients' calls go
    on while the thread works."""
    if quick and call.one_client:
        return work()
    return await anyio.to_thread.run_sync(work)


def client_of(ctx: ServerRequestContext[Any, Any]) -> ClientRef:
    """Who sent this request: the identity its bearer token names (left in the ASGI scope by the
    HTTP guard; ``anonymous`` without auth), plus its MCP session id where the protocol has one.
    Outside HTTP (stdio) there is one peer, the identity ``stdio``."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if request is None or scope is None:
        return ClientRef(STDIO_IDENTITY)
    session = request.headers.get("mcp-session-id") or None
    return ClientRef(str(scope.get(SCOPE_KEY, ANONYMOUS_IDENTITY)), session)


class CallPath(Protocol):
    """The server's one call path (validate, rate-limit, resolve, observe, handle, audit) and its tools."""

    tools: dict[str, AnyTool]

    async def call(
        self, spec: AnyTool, arguments: dict[str, Any], call: CallInfo
    ) -> types.CallToolResult: ...


class ActionObserver(Protocol):
    """Watches action tools: ``begin`` runs after the target is resolved and before the action,
    ``end`` after it. The recorder is the one (turn folders); anything returned by ``begin`` is
    handed back to ``end``."""

    async def begin(
        self, call: CallInfo, spec: AnyTool, arguments: dict[str, Any], refused: ErrorInfo | None
    ) -> object: ...

    async def end(
        self,
        token: object,
        call: CallInfo,
        result: ToolResult | None,
        error: ErrorInfo | None,
        duration_ms: float,
    ) -> None: ...

    async def settle(self) -> None:
        """Finish observing the actions already answered (their "after" observations): a tool that
        changes the desktop without a target to observe waits for this before it runs."""
        ...


class Recorder(ActionObserver, Protocol):
    """The action observer that records: turn folders of the action tools' calls."""

    def close(self) -> None:
        """Finalise every recording (turn folders, videos). Blocking."""
        ...


@dataclass
class Services:
    """Everything a handler may use, built once per server."""

    desktop: Desktop
    settings: Settings
    security: SecurityContext
    #: Extra readiness facts (window manager, app) that the rig supervisor provides.
    extras: dict[str, Any] = field(default_factory=dict)
    #: The recorder (``deskrig.recording.RecordingRegistry``), built before the services: it watches
    #: the action tools and the recording tools drive it. Held by its interface, as this module
    #: sits below ``deskrig.recording``.
    recorder: Recorder | None = None
    #: The desktop's accessibility bus, if it has one.
    a11y: A11yAccess | None = None
    #: Starts apps on this desktop (the rig's launcher inside a rig).
    launcher: AppLauncher = field(default_factory=lambda: SubprocessLauncher({}))
    #: Masks personal data under the policy (``settings.security.pii_masking``); one per server,
    #: shared with the recorder's observer (one OCR engine, one cache).
    masker: PiiMasker | None = None
    #: What a client may see of the desktop (blocked windows blacked out).
    observer: Observer = field(init=False)
    capture: CapturePipeline = field(init=False)

    def __post_init__(self) -> None:
        if self.masker is None:
            self.masker = PiiMasker(self.settings.security.pii_masking)
        self.observer = Observer(self.desktop, self.security.blocklist, self.masker)
        self.capture = CapturePipeline(self.observer, self.settings, self.security)


Handler = Callable[[Services, CallInfo, InputT], Awaitable[ToolResult]]
#: Resolves an action's target (pid, window, point, element) before the action runs.
Resolver = Callable[[Services, CallInfo, InputT], Awaitable[ActionTarget]]


@dataclass(frozen=True)
class ToolSpec(Generic[InputT]):
    """One MCP tool, declared once."""

    name: str
    description: str
    input_model: type[InputT]
    output_model: type[BaseModel]
    handler: Handler[InputT]
    read_only: bool = True
    #: Counted by the capture rate limit.
    captures: bool = False
    #: An action (click, type ...): observers see it, and ``resolve`` finds its target first.
    resolve: Resolver[InputT] | None = None
    #: Each call becomes a turn of the recordings (and replay_trajectory re-runs it). A tool that
    #: changes the desktop (``read_only=False``) must say whether it is recorded: a new action
    #: cannot be left out of recordings by omission. Only an action (with ``resolve``) can be.
    recorded: bool | None = None
    profile: Profile = "default"
    #: A short human-readable name (MCP ``title``); every tool has one.
    title: str | None = None
    #: Whether a call may destroy or overwrite something (MCP ``destructiveHint``); default: any
    #: tool that is not read-only. Moving the pointer or launching an app changes the desktop but
    #: destroys nothing.
    destructive: bool | None = None
    #: Leave null fields out of the structured result (the acs envelope has either data or filePath).
    omit_none: bool = False
    #: A failure in the shape of ``output_model``, for a tool whose output schema admits failures (the
    #: acs envelope has ``status`` and ``error``): it is then the structured content of the error result.
    #: Otherwise an error result has no structured content (it would not match the output schema,
    #: and strict clients such as the MCP Inspector reject it); the error JSON is in its text block.
    error_output: Callable[[ErrorInfo], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not self.read_only and self.recorded is None:
            raise ValueError(f"tool {self.name}: say whether it is recorded (recorded=True/False)")
        if self.recorded and self.resolve is None:
            raise ValueError(f"tool {self.name}: a recorded tool needs resolve (a turn has a target)")

    @property
    def action(self) -> bool:
        return self.resolve is not None

    @property
    def destructive_hint(self) -> bool:
        return self.destructive if self.destructive is not None else not self.read_only


#: A tool of any input model, as registries and the server hold them.
AnyTool = ToolSpec[Any]
