"""What the image is made of, as a digest: the part of a rendered MachineConfig that our build
puts into the image.

The build id hashed the rendered config's *name*. A rendered config's name is a hash of all its
content, `osImageURL` included (openshift/machine-config-operator
`pkg/controller/render/render_controller.go`), so the MachineConfig through which we hand our image
to the MCO gives the pool a new rendered config, and that would start a build, whose success
changes `osImageURL` again: a loop. So the build id hashes this digest instead:

- in: `spec.config` (the Ignition the Dockerfile applies), `spec.extensions`, `spec.kernelType`
  (both installed into the image) and `spec.fips`;
- out: `spec.osImageURL` (ours, or the release's base, which the settings name already) and
  `spec.kernelArguments` (the node applies them: never image content; see desired.os_content).

A rendered config whose digest matches the one already built is the same image."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def digest(machineconfig: Mapping[str, Any]) -> str:
    """A short hash of the image content of a rendered MachineConfig (defaults normalised:
    no extensions = [], no kernelType = "default", no fips = false)."""
    spec = machineconfig.get("spec") if isinstance(machineconfig, Mapping) else None
    spec = spec if isinstance(spec, Mapping) else {}
    content = {"config": spec.get("config"), "extensions": list(spec.get("extensions") or []),
               "kernelType": spec.get("kernelType") or "default", "fips": bool(spec.get("fips"))}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
