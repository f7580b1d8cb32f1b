"""The image builders, one module each, behind the interface in `base` (looked up by type)."""

from __future__ import annotations

import functools
from typing import Any

from reconcile.imagebuild import settings
from reconcile.imagebuild.builders import build, pod
from reconcile.imagebuild.builders.base import STORAGE_MOUNT, BuildContext, Builder

#: Each builder module is a `Builder` (base.py): a module satisfies the protocol by its attributes.
BUILDERS: dict[str, Builder] = {settings.CUSTOM_POD_BUILDER: pod,      # type: ignore[dict-item]
                                settings.OPENSHIFT_IMAGE_BUILDER: build}


def for_type(builder_type: str) -> Builder:
    """The builder of a type that settings.read validated (KeyError for any other)."""
    return BUILDERS[builder_type]


@functools.cache
def sample_pod() -> dict[str, Any]:
    """A build Pod rendered with placeholder inputs: what every build Pod has (its env names, mount
    paths, ServiceAccount), build storage included. Do not change it: it is cached."""
    ctx = BuildContext(**{f: "x" for f in ("namespace", "pool", "rendered_config", "name", "tag",
                                            "dockerfile_configmap", "pull_secret", "push_secret",
                                            "buildah_image")},
                       machineconfig_configmaps=("x",), labels={}, annotations={}, owner={},
                       storage_claim="x", storage_mount=STORAGE_MOUNT)
    return pod.render(ctx)


@functools.cache
def reserved() -> tuple[frozenset[str], frozenset[str]]:
    """Env var names and paths the build itself uses, read off a rendered build Pod: a build input
    must not take them."""
    (container,) = sample_pod()["spec"]["containers"]
    return (frozenset(e["name"] for e in container["env"]),
            frozenset(m["mountPath"] for m in container["volumeMounts"]))


def storage_driver(builder: Builder) -> str:
    """The storage driver a builder's build keeps images with: the buildah Pod's STORAGE_DRIVER;
    "" for an OpenShift Build (its builder chooses)."""
    if builder is not pod:
        return ""
    (container,) = sample_pod()["spec"]["containers"]
    return next((e.get("value", "") for e in container["env"] if e["name"] == "STORAGE_DRIVER"), "")
