"""Fixtures of the deskrig pytest plugin: ``deskrig_rig`` and the session-wide ``deskrig_orchestrator``.

One in-process orchestrator serves the whole pytest session (under pytest-xdist, one per worker).
A function-scoped rig is started for its test and stopped after it: its artifacts are deleted
when the test passed, kept when it failed. A session-scoped rig is shared by every test asking
for the same image, app and options, and stopped at the end; kept if any of its tests failed.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import pytest

if TYPE_CHECKING:
    from mcp import Client

    from deskrig.orchestrator.blocking import BlockingOrchestrator
    from deskrig.orchestrator.models import RuntimeName, SessionInfo, SessionSpec

SCOPES = ("function", "session")


@dataclass(frozen=True)
class SessionRig:
    """An orchestrator session's rig as a test gets it: where its MCP server is, its token and
    its artifacts directory."""

    session: SessionInfo

    def __repr__(self) -> str:
        return f"SessionRig(id={self.id!r}, mcp_url={self.session.mcp_url!r}, artifacts_dir={str(self.artifacts_dir)!r})"

    @property
    def kept(self) -> str:
        """What a failed test keeps of this rig, for its report."""
        return "turn folders, video and rig.log" if self.session.spec.video else "turn folders and rig.log"

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def mcp_url(self) -> str:
        assert self.session.mcp_url is not None
        return self.session.mcp_url

    @property
    def token(self) -> str:
        assert self.session.token is not None
        return self.session.token

    @property
    def artifacts_dir(self) -> Path:
        return Path(self.session.artifacts_dir)

    def client(self) -> contextlib.AbstractAsyncContextManager[Client]:
        """``async with rig.client() as client:`` a connected MCP client."""
        from deskrig.client import connect

        return connect(self.mcp_url, self.token)


RIG_KEY = pytest.StashKey[SessionRig]()
REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()


@dataclass(frozen=True)
class KeptArtifacts:
    """A failed test's rig artifacts, and its trajectory report (or why there is none)."""

    nodeid: str
    directory: Path
    report: Path | None
    no_report: str | None = None

    def lines(self) -> list[str]:
        said = f"report: {self.report}" if self.report else f"no report: {self.no_report}"
        return [f"{self.nodeid}: {self.directory}", f"  {said}"]


def kept_artifacts(nodeid: str, directory: Path) -> KeptArtifacts:
    """Write the HTML report of the turns recorded in ``directory`` (``deskrig view``) beside them."""
    from deskrig.errors import DeskrigError
    from deskrig.viewer import DEFAULT_NAME
    from deskrig.viewer.load import load_recording
    from deskrig.viewer.report import write_report

    try:
        report = write_report(load_recording(directory), directory, directory / DEFAULT_NAME)
    except DeskrigError as exc:
        return KeptArtifacts(nodeid, directory, None, exc.message)
    return KeptArtifacts(nodeid, directory, report)


KEPT_KEY = pytest.StashKey[list[KeptArtifacts]]()


@dataclass(frozen=True)
class PluginOptions:
    """The plugin's settings, from its flags and ini keys (see :mod:`deskrig.pytest_plugin`)."""

    image: str
    app: str | None
    backend: str | None
    scope: str
    video: bool
    keep: bool
    artifacts: Path
    max_sessions: int | None
    ready_timeout: float | None
    runtime: RuntimeName

    @classmethod
    def from_config(cls, config: pytest.Config) -> PluginOptions:
        def value(name: str) -> Any:
            given = config.getoption(f"deskrig_{name}")
            return given if given is not None else config.getini(f"deskrig_{name}")

        from deskrig.orchestrator.models import DEFAULT_RUNTIME, RigBackend, RuntimeName

        runtime = value("runtime") or DEFAULT_RUNTIME
        if runtime not in get_args(RuntimeName):
            raise pytest.UsageError(
                f"--deskrig-runtime wants one of {', '.join(get_args(RuntimeName))}, got {runtime!r}"
            )
        scope = value("scope") or "function"
        backend = value("backend") or None
        if backend is not None and backend not in get_args(RigBackend):
            raise pytest.UsageError(
                f"--deskrig-backend wants one of {', '.join(get_args(RigBackend))}, got {backend!r}"
            )
        if scope not in SCOPES:
            raise pytest.UsageError(f"--deskrig-scope wants one of {', '.join(SCOPES)}, got {scope!r}")
        artifacts = Path(value("artifacts") or Path(config.rootpath) / "deskrig-artifacts")
        video = value("video")
        try:
            max_sessions = int(value("max_sessions")) if value("max_sessions") else None
            ready_timeout = float(value("ready_timeout")) if value("ready_timeout") else None
        except ValueError as exc:
            raise pytest.UsageError(f"deskrig: {exc}") from exc
        return cls(
            image=value("image") or "deskrig/rig:latest",
            app=value("app") or None,
            backend=backend,
            scope=scope,
            video=True if video is None else bool(video),
            keep=bool(value("keep")),
            artifacts=artifacts.resolve(),
            max_sessions=max_sessions,
            ready_timeout=ready_timeout,
            runtime=runtime,
        )

    def header(self) -> str:
        return (
            f"deskrig: image={self.image} app={self.app or '(image default)'} "
            f"backend={self.backend or '(image default)'} scope={self.scope} "
            f"video={self.video} keep={self.keep} runtime={self.runtime} artifacts={self.artifacts}"
        )

    def request(self, node: pytest.Item) -> tuple[SessionSpec, str]:
        """The session spec and scope for one test: options, overridden by its ``deskrig`` marker."""
        from pydantic import ValidationError

        from deskrig.orchestrator.models import SessionSpec

        marker = node.get_closest_marker("deskrig")
        given = dict(marker.kwargs) if marker else {}
        scope = given.pop("scope", None) or self.scope
        if scope not in SCOPES:
            raise pytest.UsageError(f"{node.nodeid}: deskrig marker scope must be one of {SCOPES}")
        fields = {"image": self.image, "app": self.app, "backend": self.backend, "video": self.video, **given}
        if scope == "function":
            fields["name"] = node.nodeid
        if self.ready_timeout is not None:
            fields.setdefault("ready_timeout", self.ready_timeout)
        try:
            return SessionSpec.model_validate(fields), scope
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise pytest.UsageError(f"{node.nodeid}: deskrig marker: {problems}") from None


class RigPool:
    """The rigs of one pytest session, over one orchestrator."""

    def __init__(
        self, options: PluginOptions, orchestrator: BlockingOrchestrator, config: pytest.Config
    ) -> None:
        self.options = options
        self.orchestrator = orchestrator
        self._config = config
        self._shared: dict[str, SessionRig] = {}
        self._shared_failed: dict[str, str] = {}

    def start(self, spec: SessionSpec) -> SessionRig:
        return SessionRig(self.orchestrator.start(spec))

    def shared(self, spec: SessionSpec) -> SessionRig:
        key = spec.model_dump_json()
        if key not in self._shared:
            self._shared[key] = self.start(spec)
        return self._shared[key]

    def mark_failed(self, rig: SessionRig, nodeid: str) -> None:
        self._shared_failed.setdefault(rig.id, nodeid)

    def finish(self, rig: SessionRig, *, failed_test: str | None) -> None:
        """Stop the rig; keep its artifacts if a test failed (or --deskrig-keep), else delete them."""
        self.orchestrator.stop(rig.id)
        if failed_test is not None:
            self._config.stash.setdefault(KEPT_KEY, []).append(kept_artifacts(failed_test, rig.artifacts_dir))
        elif not self.options.keep:
            shutil.rmtree(rig.artifacts_dir, ignore_errors=True)

    def close(self) -> None:
        for rig in self._shared.values():
            self.finish(rig, failed_test=self._shared_failed.get(rig.id))
        self._shared.clear()


def _failed(node: pytest.Item) -> bool:
    return any(report.failed for report in node.stash.get(REPORTS_KEY, {}).values())


@pytest.fixture(scope="session")
def deskrig_orchestrator(pytestconfig: pytest.Config) -> Iterator[RigPool]:
    """The pytest session's orchestrator and its rigs (stopped at the end)."""
    from deskrig.orchestrator.blocking import BlockingOrchestrator
    from deskrig.orchestrator.models import OrchestratorConfig

    options = PluginOptions.from_config(pytestconfig)
    settings: dict[str, Any] = {"artifacts_root": options.artifacts, "runtime": options.runtime}
    if options.max_sessions:
        settings["max_sessions"] = options.max_sessions
    with BlockingOrchestrator(OrchestratorConfig.model_validate(settings)) as orchestrator:
        pool = RigPool(options, orchestrator, pytestconfig)
        try:
            yield pool
        finally:
            pool.close()


@pytest.fixture
def deskrig_rig(request: pytest.FixtureRequest, deskrig_orchestrator: RigPool) -> Iterator[SessionRig]:
    """A running rig for this test: ``mcp_url``, ``token``, ``client()`` and ``artifacts_dir``."""
    pool = deskrig_orchestrator
    node = request.node
    assert isinstance(node, pytest.Item)
    spec, scope = pool.options.request(node)
    rig = pool.shared(spec) if scope == "session" else pool.start(spec)
    node.stash[RIG_KEY] = rig
    try:
        yield rig
    finally:
        failed = node.nodeid if _failed(node) else None
        if scope == "session":
            if failed:
                pool.mark_failed(rig, failed)
        else:
            pool.finish(rig, failed_test=failed)
