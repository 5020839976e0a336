"""``scripts/build-images``: its ``--tag`` builds all three images under that tag; a bad argument
is refused before anything is set up or built."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from tests.container.conftest import REPO, docker, run

IMAGES = ("deskrig/rig", "deskrig/example-gtk", "deskrig/example-qt")


def build_images(*args: str) -> tuple[int, str]:
    """Run ``scripts/build-images ARGS`` with none of the caller's DESKRIG_ or COMPOSE_ variables;
    its status and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DESKRIG_", "COMPOSE_"))}
    done = run(
        [str(REPO / "scripts" / "build-images"), *args], env=env | {"DESKRIG_PROGRESS": "quiet"}, timeout=600
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tag"], "usage: scripts/build-images [--tag TAG] [SERVICE...]"),
        (["--tag", "not a tag"], "build-images: 'not a tag' is not a Docker tag"),
        (["--tag=.hidden"], "build-images: '.hidden' is not a Docker tag"),
        (["--tags", "s31"], "build-images: unknown option --tags"),
    ],
)
def test_a_bad_argument_is_refused_before_anything_is_built(args: list[str], said: str) -> None:
    status, stderr = build_images(*args)
    assert status == 2, stderr
    assert said in stderr
    assert "build-images: base" not in stderr  # Docker was not set up, nothing was built


def layers(image: str) -> list[str]:
    found = docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", image)
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)  # type: ignore[no-any-return]


@pytest.mark.docker
def test_tag_builds_all_three_images_under_it(rig_images: None) -> None:
    """All three images under the tag, the examples on the rig image's layers. The tree is the one
    ``rig_images`` built: the build cache makes this about a second."""
    tag = f"test-{uuid.uuid4().hex[:8]}"
    try:
        status, stderr = build_images("--tag", tag)
        assert status == 0, stderr
        rig, gtk, qt = (layers(f"{image}:{tag}") for image in IMAGES)
        assert gtk[: len(rig)] == qt[: len(rig)] == rig
    finally:
        docker("image", "rm", *(f"{image}:{tag}" for image in IMAGES))
