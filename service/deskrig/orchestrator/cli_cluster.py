"""``deskrig images push`` and ``deskrig k8s manifests``: rig images on a registry, and the YAML
that runs the orchestrator in a Kubernetes cluster."""

from __future__ import annotations

import argparse
import sys

from deskrig.orchestrator.cli_common import print_json, stderr_console


def push(args: argparse.Namespace) -> int:
    from deskrig.errors import ConfigError, DeskrigError, ErrorCode
    from deskrig.extras import needs_extra

    with needs_extra("orchestrator", "images push"):
        import docker
        from docker.errors import DockerException

    from deskrig.orchestrator.images import RIG_IMAGES, check_registry, push_images

    if not args.registry:
        raise ConfigError("images push needs --registry HOST:PORT (or $DESKRIG_REGISTRY)")
    registry = check_registry(args.registry)
    images = args.images or list(RIG_IMAGES)
    try:
        client = docker.from_env(timeout=600)
    except DockerException as exc:
        raise DeskrigError(ErrorCode.RUNTIME_UNAVAILABLE, f"cannot talk to the Docker engine: {exc}") from exc
    try:
        with stderr_console().status(f"pushing {len(images)} image(s) to {registry}"):
            pushed = push_images(client, registry, images, tag=args.tag)
    finally:
        client.close()
    if args.json:
        print_json([{"source": p.source, "reference": p.reference, "digest": p.digest} for p in pushed])
    else:
        for item in pushed:
            sys.stdout.write(f"{item.source} -> {item.reference} {item.digest}\n")
    return 0


def manifests(args: argparse.Namespace) -> int:
    from deskrig.errors import ConfigError
    from deskrig.orchestrator import yaml_text
    from deskrig.orchestrator.images import check_registry
    from deskrig.orchestrator.kubernetes_objects import is_dns_label, manifests

    if not args.image:
        raise ConfigError("k8s manifests needs --image IMAGE: an image with deskrig[kubernetes] installed")
    namespace = args.namespace or "deskrig"
    if not is_dns_label(namespace):
        raise ConfigError(f"--namespace {namespace!r} is not a DNS label (a-z, 0-9, -; at most 63)")
    registry = check_registry(args.registry) if args.registry else None
    sys.stdout.write(yaml_text.dump_all(manifests(args.image, namespace, registry=registry)))
    return 0
