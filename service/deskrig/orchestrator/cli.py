"""``deskrig session ...``, ``deskrig orchestrator ...``, ``deskrig images push`` and ``deskrig k8s
manifests``: their parsers and the dispatch to their handlers (``cli_session``, ``cli_service``,
``cli_cluster``).

Everything heavy is imported inside the handlers, so ``deskrig rig run`` never pays for it.
Results go to stdout (``--json`` for scripts); progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from deskrig.orchestrator import cli_cluster, cli_service, cli_session
from deskrig.orchestrator.cli_flags import Flags, apply_environment
from deskrig.orchestrator.cli_service import DEFAULT_LISTEN


def _registry_flag(flags: Flags) -> None:
    flags.value(
        "--registry",
        env="DESKRIG_REGISTRY",
        metavar="HOST:PORT",
        help="pull rig images from this registry (deskrig/rig:latest -> HOST:PORT/deskrig/rig:latest)",
    )


def register(commands: Any) -> None:
    """Add the ``session``, ``orchestrator``, ``images`` and ``k8s`` commands to deskrig's subparsers."""
    session = commands.add_parser(
        "session", help="start, list and stop rigs through the orchestrator service"
    )
    sessions = session.add_subparsers(dest="session_command", required=True)

    start = Flags(
        sessions.add_parser("start", help="start a rig (starts the orchestrator service if none runs)")
    )
    start.value("--image", env="DESKRIG_SESSION_IMAGE", help="rig image (default deskrig/rig:latest)")
    start.value(
        "--app", env="DESKRIG_SESSION_APP", metavar="CMD", help="app command line (default: the image's)"
    )
    start.value("--size", env="DESKRIG_SESSION_SIZE", metavar="WxH", help="screen size")
    start.value(
        "--backend",
        env="DESKRIG_SESSION_BACKEND",
        metavar="NAME",
        help="the rig's desktop: x11 (Xvfb) or sway (headless sway) (default: the image's)",
    )
    start.many("--env", env="DESKRIG_SESSION_ENV", metavar="NAME=VALUE", help="rig environment")
    start.switch("--no-record", env="DESKRIG_SESSION_NO_RECORD", help="do not record turn folders")
    start.switch("--video", env="DESKRIG_SESSION_VIDEO", help="also record an mp4 of the session")
    start.value("--name", env="DESKRIG_SESSION_NAME", help="a label for the session")
    start.value(
        "--artifacts-dir",
        env="DESKRIG_SESSION_ARTIFACTS_DIR",
        metavar="DIR",
        help="host directory for the session's artifacts",
    )
    start.runtime()
    start.timeouts("DESKRIG_SESSION", "")
    _registry_flag(start)  # for the service it starts, when none runs
    start.json("print {id, mcp_url, token, artifacts_dir}")
    start.common()

    stop = Flags(
        sessions.add_parser("stop", help="stop sessions: finalize the video, keep artifacts, remove the rig")
    )
    stop.parser.add_argument("ids", nargs="+", metavar="ID")
    stop.json()
    stop.common()

    ls = Flags(sessions.add_parser("ls", help="sessions with name, state, age, endpoint and turn count"))
    ls.json()
    ls.common()

    logs = Flags(sessions.add_parser("logs", help="the rig's log"))
    logs.parser.add_argument("id", metavar="ID")
    logs.value("--tail", env="DESKRIG_LOGS_TAIL", type=int, metavar="N", help="last N lines only")
    logs.common()

    artifacts = Flags(sessions.add_parser("artifacts", help="list a session's artifacts, or fetch one"))
    artifacts.parser.add_argument("id", metavar="ID")
    artifacts.parser.add_argument("path", nargs="?", help="one file to write to stdout (or -o FILE)")
    artifacts.value(
        "-o", "--output", env="DESKRIG_ARTIFACT_OUTPUT", metavar="FILE", help="write the file here"
    )
    artifacts.json()
    artifacts.common()

    orchestrator = commands.add_parser(
        "orchestrator", help="the orchestrator service the session commands use"
    )
    service = orchestrator.add_subparsers(dest="orchestrator_command", required=True)
    serve = Flags(
        service.add_parser("serve", help="run the orchestrator service (foreground unless --background)")
    )
    serve.value(
        "--listen",
        env="DESKRIG_ORCHESTRATOR_LISTEN",
        metavar="HOST:PORT",
        help=f"API address (default {DEFAULT_LISTEN}: loopback, any port)",
    )
    serve.switch(
        "--background",
        env="DESKRIG_ORCHESTRATOR_BACKGROUND",
        help="start detached and return once it answers",
    )
    serve.value(
        "--max-sessions",
        env="DESKRIG_MAX_SESSIONS",
        type=int,
        metavar="N",
        help="rigs at once per node (default from CPUs and memory; swarm: times its active nodes)",
    )
    serve.value(
        "--artifacts-root", env="DESKRIG_ARTIFACTS_ROOT", metavar="DIR", help="where session directories go"
    )
    serve.value(
        "--rig-bind",
        env="DESKRIG_RIG_BIND",
        metavar="ADDR",
        help="address rig ports are published on (default 127.0.0.1)",
    )
    serve.runtime()
    serve.many(
        "--placement-constraint",
        env="DESKRIG_PLACEMENT_CONSTRAINTS",
        metavar="EXPR",
        help="swarm: nodes a rig may run on, e.g. node.labels.gui==yes",
    )
    serve.many(
        "--placement-preference",
        env="DESKRIG_PLACEMENT_PREFERENCES",
        metavar="spread=LABEL",
        help="swarm: spread rigs over a node label's values, e.g. spread=node.labels.zone",
    )
    serve.timeouts("DESKRIG_ORCHESTRATOR", " (default for sessions)")
    _registry_flag(serve)
    serve.common()
    service_stop = Flags(service.add_parser("stop", help="stop the service and all its sessions"))
    service_stop.common()
    status = Flags(service.add_parser("status", help="whether the service runs, and where"))
    status.json("print {running, url, pid, orchestrator_id, started_at, runtime, sessions, state_dir}")
    status.common()

    images = commands.add_parser("images", help="the rig images on a registry, for cluster nodes to pull")
    image_commands = images.add_subparsers(dest="images_command", required=True)
    push = Flags(
        image_commands.add_parser("push", help="tag local rig images under a registry and push them there")
    )
    push.parser.add_argument(
        "images", nargs="*", metavar="IMAGE", help="local images (default: the rig and example images)"
    )
    push.value("--registry", env="DESKRIG_REGISTRY", metavar="HOST:PORT", help="the registry to push to")
    push.value(
        "--tag", env="DESKRIG_PUSH_TAG", metavar="TAG", help="push under this tag (default: each image's own)"
    )
    push.json("print [{source, reference, digest}]")
    push.common()

    k8s = commands.add_parser("k8s", help="Kubernetes: the manifests that run the orchestrator in a cluster")
    k8s_commands = k8s.add_subparsers(dest="k8s_command", required=True)
    manifests = Flags(
        k8s_commands.add_parser(
            "manifests",
            help="print YAML: namespace, service account, RBAC role and binding, the orchestrator's "
            "Deployment and Service",
        )
    )
    manifests.value(
        "--image", env="DESKRIG_K8S_IMAGE", metavar="IMAGE", help="the orchestrator's image (required)"
    )
    manifests.value(
        "--namespace",
        env="DESKRIG_K8S_NAMESPACE",
        metavar="NS",
        help="namespace for it and its rigs (default deskrig)",
    )
    _registry_flag(manifests)
    manifests.common()


def run(args: argparse.Namespace) -> int:
    """Dispatch a ``session`` or ``orchestrator`` command; a failure is one line on stderr."""
    import logging

    from deskrig.cli_errors import report_cli_error
    from deskrig.errors import DeskrigError

    try:
        apply_environment(args, os.environ)
        verbose = bool(getattr(args, "verbose", False))
        logging.getLogger("httpx2").setLevel(logging.DEBUG if verbose else logging.WARNING)
        if args.command == "images":
            return cli_cluster.push(args)
        if args.command == "k8s":
            return cli_cluster.manifests(args)
        if args.command == "orchestrator":
            handlers = {"serve": cli_service.serve, "stop": cli_service.stop, "status": cli_service.status}
            return handlers[args.orchestrator_command](args)
        handlers = {
            "start": cli_session.start,
            "stop": cli_session.stop,
            "ls": cli_session.ls,
            "logs": cli_session.logs,
            "artifacts": cli_session.artifacts,
        }
        return handlers[args.session_command](args)
    except DeskrigError as exc:
        return report_cli_error(exc, verbose=bool(getattr(args, "verbose", False)))
