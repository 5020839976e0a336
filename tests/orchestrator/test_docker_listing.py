"""The tests' own way of listing rig containers, against a real Docker engine."""

from __future__ import annotations

import contextlib
import uuid

import docker
import pytest
from tests.orchestrator.helpers import containers

from deskrig.orchestrator.runtime import managed_labels


def test_a_container_removed_while_it_is_listed_is_left_out(
    rig_image: str, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK lists, then inspects each container; an orchestrator removing a rig between the
    two once failed a test that only waited for that removal."""
    session = f"listing-{uuid.uuid4().hex[:8]}"
    going, staying = (
        docker_client.containers.create(rig_image, labels=managed_labels(session)) for _ in range(2)
    )
    lister = docker.from_env()
    inspect = lister.api.inspect_container

    def removed_first(container_id: str) -> object:
        if container_id == going.id:
            docker_client.api.remove_container(going.id)
        return inspect(container_id)

    monkeypatch.setattr(lister.api, "inspect_container", removed_first)
    try:
        assert [c.id for c in containers(lister, session=session)] == [staying.id]
    finally:
        lister.close()
        for made in (going, staying):
            with contextlib.suppress(docker.errors.NotFound):
                made.remove(force=True)
