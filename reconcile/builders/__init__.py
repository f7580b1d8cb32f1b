"""The image builders, one module each, behind the interface in `base` (looked up by type)."""

from __future__ import annotations

import functools
from types import ModuleType

from reconcile import settings
from reconcile.builders import build, pod
from reconcile.builders.base import BuildContext

BUILDERS: dict[str, ModuleType] = {settings.CUSTOM_POD_BUILDER: pod,
                                   settings.OPENSHIFT_IMAGE_BUILDER: build}


def for_type(builder_type: str) -> ModuleType | None:
    return BUILDERS.get(builder_type)


@functools.cache
def reserved() -> tuple[frozenset[str], frozenset[str]]:
    """Env var names and paths the build itself uses, read off a rendered build Pod: a build input
    must not take them."""
    ctx = BuildContext(**{f: "x" for f in ("namespace", "pool", "rendered_config", "name", "tag",
                                            "dockerfile_configmap", "pull_secret", "push_secret",
                                            "buildah_image")},
                       machineconfig_configmaps=("x",), labels={}, annotations={}, owner={})
    (container,) = pod.render(ctx)["spec"]["containers"]
    return (frozenset(e["name"] for e in container["env"]),
            frozenset(m["mountPath"] for m in container["volumeMounts"]))
