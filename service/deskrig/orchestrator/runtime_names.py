"""The runtimes a session's rig can run on, named without the orchestrator's models: every
``deskrig`` command builds the whole parser, ``--runtime``'s choices included, and ``deskrig rig
run`` (a container's cold start) must not build the orchestrator's pydantic models for it."""

from __future__ import annotations

from typing import Literal

RuntimeName = Literal["docker", "swarm", "kubernetes"]
DEFAULT_RUNTIME: RuntimeName = "docker"
