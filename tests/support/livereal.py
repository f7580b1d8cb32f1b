"""What each kind of change costs a pool (issue 39 item 5), measured on the real kube-apiserver with
the MCO's own render and node controllers (tests/support/mcoreal.py, `make mco`) and the played
daemon, the real daemon's verdict for every node update: docs/rollout.md's table's columns for this
version (`liveChanges: apply`) and the version before (`rebuild`). livemeasure.py measures the same
rows on the imitations; tests/realapi/test_realapi_live_table.py holds the two to each other and
`make bench-live` prints this one.

One cluster per mode, as the gate's realapi tests set it up (a worker pool of two nodes, built and
held by the gate, release 4.18.3): the change kinds are applied one after another, each as its own
delta on what the cluster has then (a file of the MCO's `00-worker` set, changed or removed; a
MachineConfig added; an administrator's node disruption policy; a new base image), and each is
counted from the change until a run writes nothing and the MCO has nothing left to do. The
MachineConfiguration `cluster`'s policies, which outlive a test on the worker's server, are put back."""

from __future__ import annotations

import json
import subprocess
from typing import Any
from urllib.parse import unquote

from tests.support import factory as F
from tests.support import livemeasure as L
from tests.support import mcoreal as M

RELEASE = "4.18.3"


def _files(mc: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: unquote(f["contents"]["source"].removeprefix("data:,"))
            for f in mc["spec"]["config"].get("storage", {}).get("files", [])}


def _set_files(mc: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    mc["spec"]["config"]["storage"]["files"] = L.source("x", files)["spec"]["config"]["storage"]["files"]
    return mc


def _policies(mco: M.Cluster, entries: list[dict[str, Any]], tmp) -> dict[str, Any]:
    """`ocl-mco-harness policies --spec`: the MCO's own MergeClusterPolicies of these entries."""
    spec = tmp / "ndp-spec.json"
    spec.write_text(json.dumps({"files": entries}))
    out = subprocess.run([str(mco.daemon.installed.binary), "policies", "--spec", str(spec)],
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def _write_policies(real, policies: dict[str, Any]) -> None:
    mcop = real.api.request("GET", f"{M.MCOP_PATH}/cluster")[1]
    mcop["status"]["nodeDisruptionPolicyStatus"] = {"clusterPolicies": policies}
    real.api.request("PUT", f"{M.MCOP_PATH}/cluster/status", mcop)


def _apply(real, mco: M.Cluster, kind: str, tmp) -> None:
    """One change kind of livemeasure.CHANGES, as its delta on the cluster's MachineConfigs."""
    changed, entries, new_base = L.CHANGES[kind]
    for mc in changed:
        name = mc["metadata"]["name"]
        if name != "00-worker":
            real.api.create(mc)
            continue
        before, after = _files(L.generated(L.BASE_FILES)), _files(mc)
        live = real.api.get("MachineConfig", "", name)
        files = _files(live)
        files.update({p: c for p, c in after.items() if before.get(p) != c})
        for path in set(before) - set(after):
            files.pop(path, None)
        real.api.request("PUT", real.api.path("MachineConfig", "", name), _set_files(live, files))
    if entries:
        _write_policies(real, _policies(mco, entries, tmp))
    if new_base:
        cm = real.api.get("ConfigMap", F.MCO_NS, "machine-config-osimageurl")
        cm["data"]["baseOSContainerImage"] = new_base
        real.api.request("PUT", real.api.path("ConfigMap", F.MCO_NS, "machine-config-osimageurl"), cm)
        mco.daemon.installed.streams(new_base)


def _row(moves: M.Moves, builds: int) -> L.Row:
    nodes = len({m.node for m in moves}) or 1
    quiet = [m.verdict for m in moves if not m.reboot]
    return L.Row(builds, len(moves) // nodes, moves.reboots // nodes,
                 L.said(quiet[0]["actions"]) if quiet else "", sum(1 for v in quiet if v["drain"]) // nodes)


def measure(real, mco: M.Cluster, registry, live: str, kinds: list[str], tmp) -> dict[str, L.Row]:
    """{change kind: Row} with `liveChanges: live`, the kinds applied in this order on one cluster."""
    from tests.realapi.test_realapi_gate import cycle, start
    start(real, mco, F.BUILDER, registry, gate="hold")
    cm = real.api.get("ConfigMap", F.NS, "on-cluster-build-config")
    cm["data"]["liveChanges"] = live
    real.api.request("PUT", real.api.path("ConfigMap", F.NS, "on-cluster-build-config"), cm)
    osimage = real.api.get("ConfigMap", F.MCO_NS, "machine-config-osimageurl")
    osimage["data"].update(releaseVersion=RELEASE, baseOSExtensionsContainerImage=L.EXT)
    real.api.request("PUT", real.api.path("ConfigMap", F.MCO_NS, "machine-config-osimageurl"), osimage)
    base = real.api.get("MachineConfig", "", "00-worker")
    real.api.request("PUT", real.api.path("MachineConfig", "", "00-worker"), _set_files(base, L.BASE_FILES))
    defaults = mco.daemon.installed.policies
    rows = {}
    try:
        cycle(real, mco, registry, M.Moves())
        for kind in kinds:
            started = _builds(real)
            _apply(real, mco, kind, tmp)
            moves = M.Moves()
            cycle(real, mco, registry, moves)
            rows[kind] = _row(moves, _builds(real) - started)
    finally:
        _write_policies(real, defaults)
    return rows


def _builds(real) -> int:
    return sum(1 for e in real.events() if e["reason"] == "BuildStarted")
