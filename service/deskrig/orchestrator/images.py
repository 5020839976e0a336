"""Rig images on many nodes: the registry prefix, and pushing the rig images to a registry.

A cluster node can only run an image it can pull. With ``--registry HOST:PORT`` every runtime
names its rigs' images through :func:`image_reference` (``deskrig/rig:latest`` becomes
``HOST:PORT/deskrig/rig:latest``); ``deskrig images push`` tags the local images that way and
pushes them. An image that already names a registry (``ghcr.io/team/app:1``) is left as it is:
whoever wrote it chose where it comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deskrig.errors import ConfigError, DeskrigError, ErrorCode

if TYPE_CHECKING:
    import docker

#: The images scripts/build-images builds, pushed when ``images push`` names none.
RIG_IMAGES = ("deskrig/rig:latest", "deskrig/example-gtk:latest", "deskrig/example-qt:latest")

_REGISTRY = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def check_registry(registry: str) -> str:
    """``registry`` when it is ``HOST`` or ``HOST:PORT``; INVALID_ARGUMENT otherwise."""
    if not _REGISTRY.match(registry) or "/" in registry:
        raise ConfigError(
            f"registry {registry!r} is not HOST or HOST:PORT (e.g. localhost:5000, registry.example:443)",
            details={"registry": registry},
        )
    return registry


def names_registry(image: str) -> bool:
    """Whether ``image``'s first path part is a registry host (as Docker reads a reference)."""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def split_tag(image: str) -> tuple[str, str]:
    """``(repository, tag)`` of ``image``; ``latest`` when it has none (a digest is not a tag)."""
    repository, colon, tag = image.rpartition(":")
    if not colon or "/" in tag:  # no tag, or the colon was a registry's port
        return image, "latest"
    return repository, tag


def image_reference(image: str, registry: str | None) -> str:
    """The reference a runtime runs ``image`` by: under ``registry`` when one is set."""
    if not registry or names_registry(image):
        return image
    return f"{check_registry(registry)}/{image}"


@dataclass(frozen=True)
class Pushed:
    source: str  # the local image
    reference: str  # where it went: HOST:PORT/repository:tag
    digest: str  # the registry's manifest digest


def push_images(
    client: docker.DockerClient, registry: str, images: list[str], *, tag: str | None = None
) -> list[Pushed]:
    """Tag each local image under ``registry`` (with ``tag``, else its own) and push it there."""
    from docker.errors import DockerException, ImageNotFound

    check_registry(registry)
    if tag is not None and not _TAG.match(tag):
        raise ConfigError(
            f"tag {tag!r} is not a Docker tag ([A-Za-z0-9_.-], at most 128)", details={"tag": tag}
        )
    sources = []
    for source in images:  # all checked before anything is tagged: bad input changes nothing
        try:
            sources.append((source, client.images.get(source)))
        except ImageNotFound:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"no local image {source}",
                details={"image": source},
                remediation="Build it with scripts/build-images, or name an image `docker images` lists.",
            ) from None
    pushed = []
    for source, local in sources:
        repository, own_tag = split_tag(source)
        # An image from another registry goes under this one by its path alone.
        path = repository.partition("/")[2] if names_registry(repository) else repository
        target = f"{registry}/{path}"
        target_tag = tag or own_tag
        try:
            local.tag(target, target_tag)
            digest = ""
            for event in client.api.push(target, tag=target_tag, stream=True, decode=True):
                if "error" in event:
                    raise DeskrigError(
                        ErrorCode.RUNTIME_UNAVAILABLE,
                        f"pushing {target}:{target_tag} failed: {event['error']}",
                        details={"image": source, "registry": registry},
                        remediation="Check that the registry runs and that the engine may push to it "
                        "(a registry other than localhost needs TLS or an insecure-registries entry).",
                    )
                digest = event.get("aux", {}).get("Digest", digest)
        except DockerException as exc:
            raise DeskrigError(
                ErrorCode.RUNTIME_UNAVAILABLE,
                f"cannot push {source} to {registry}: {exc}",
                details={"image": source, "registry": registry},
            ) from exc
        pushed.append(Pushed(source, f"{target}:{target_tag}", digest))
    return pushed
