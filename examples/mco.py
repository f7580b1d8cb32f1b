#!/usr/bin/env python3
"""Plays the MCO's render controller on a snapshot, for `make demo`: every pool whose
machineConfigSelector selects one of our rollout MachineConfigs (`ocl-osimageurl-<pool>`) gets a
new rendered config, its current one with that `osImageURL` (the last osImageURL wins, and ours
merges after the pool's others) and `os-image-url-overridden: "true"`, named from its content.

    python3 examples/mco.py IN.yaml OUT.yaml

A shortcut for a snapshot that holds rendered configs but not their sources: the tests use the
fuller imitation in tests/support/mcorender.py, which merges source MachineConfigs as upstream does and
cites openshift/machine-config-operator for each rule. Neither is the MCO: no node is updated.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, after an installed package

from reconcile.cluster import snapshot  # noqa: E402
from reconcile.contract import selector  # noqa: E402
from reconcile.core import rollout  # noqa: E402
from reconcile.core.rollout import check as rolloutcheck

OVERRIDDEN = "machineconfiguration.openshift.io/os-image-url-overridden"


def render(items: list[dict]) -> int:
    """Re-render in place; returns how many pools got a new rendered config."""
    mcs = {o["metadata"]["name"]: o for o in items if o["kind"] == "MachineConfig"}
    ours = [mc for name, mc in sorted(mcs.items()) if name.startswith(rollout.PREFIX)]
    changed = 0
    for pool in (o for o in items if o["kind"] == "MachineConfigPool"):
        # MergeMachineConfigs' order: worker-role MachineConfigs first, then the others, each by name
        chosen = rolloutcheck.merge_order(mc for mc in ours if selector.selects(
            pool["spec"].get("machineConfigSelector"), mc["metadata"].get("labels") or {}))
        current = mcs.get(pool["spec"]["configuration"]["name"])
        if not chosen or current is None:
            continue
        image = chosen[-1]["spec"]["osImageURL"]
        if current["spec"].get("osImageURL") == image:
            continue
        spec = dict(copy.deepcopy(current["spec"]), osImageURL=image)
        digest = hashlib.md5(json.dumps(spec, sort_keys=True).encode()).hexdigest()
        name = f"rendered-{pool['metadata']['name']}-{digest}"
        metadata = {k: v for k, v in current["metadata"].items() if k not in ("uid", "resourceVersion")}
        annotations = dict(metadata.get("annotations") or {}, **{OVERRIDDEN: "true"})
        metadata.update(name=name, annotations=annotations)
        items.append({"apiVersion": current["apiVersion"], "kind": "MachineConfig", "metadata": metadata,
                      "spec": spec})
        mcs[name] = items[-1]
        pool["spec"]["configuration"]["name"] = name
        pool["spec"]["configuration"]["source"] = list(pool["spec"]["configuration"].get("source") or []) + [
            {"apiVersion": mc["apiVersion"], "kind": "MachineConfig", "name": mc["metadata"]["name"]}
            for mc in chosen]
        changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    items = snapshot.load(args[0])
    changed = render(items)
    snapshot.write(args[1], items)
    print(f"mco: {changed} pool(s) re-rendered with our osImageURL", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
