"""What each kind of change costs a pool (issue 39 item 5): builds, node updates, and the
machine-config daemon's own verdict for every node update (`ocl-mco-harness verdict`, the real
`pkg/daemon/update.go` at 7ff337a4). The MCO's render and node controllers and the daemon's moves
are the imitations of tests/support/mcorender.py and mconode.py (the real controllers need the
realapi suite; the verdicts here are the real daemon's). One measure per change kind, with this
version (`liveChanges: apply`) and as today's version builds (`rebuild`), and the MCO's own layering
(4.20+) computed from its rule: a build exactly when `ctrlcommon.RequiresRebuild` says so
(`pkg/controller/common/helpers.go`: osImageURL, kernel type, extensions, kernel arguments), and the
daemon's verdict for the node's move. Used by tests/realtools/test_live_table.py (which holds
docs/rollout.md's table to it) and bench/live_changes.py (which prints it)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import factory as F
from tests.support import mconode, mcorender, ndp

sys.path.insert(0, str(F.ROOT / "examples"))        # tests/unit/test_gate.cycle imports examples/kubelet.py

ROLE = "machineconfiguration.openshift.io/role"
REGISTRIES = "/etc/containers/registries.conf"
OLD_REGISTRIES = 'unqualified-search-registries = ["registry.access.redhat.com"]\n' \
                 '[[registry]]\nlocation = "quay.io/team"\n[[registry.mirror]]\nlocation = "mirror.example.com/team"\n'


def source(name: str, files: dict[str, str] | None = None, units: dict[str, str] | None = None,
           keys: list[str] | None = None, generated: bool = False, **spec: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"ignition": {"version": "3.4.0"}, "storage": {"files": [
        {"path": p, "mode": 420, "overwrite": True, "contents": {"source": "data:," + quote(c)}}
        for p, c in (files or {}).items()]}}
    if units:
        config["systemd"] = {"units": [{"name": n, "enabled": True, "contents": c} for n, c in units.items()]}
    if keys:
        config["passwd"] = {"users": [{"name": "core", "sshAuthorizedKeys": keys}]}
    return {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {ROLE: "worker"},
                         "annotations": {mcorender.GENERATED_BY: "ocl-test"} if generated else {}},
            "spec": {"config": config, **spec}}


BASE_FILES = {"/etc/base": "base", REGISTRIES: OLD_REGISTRIES, "/etc/containers/policy.json": "{}",
              "/etc/kubernetes/kubelet-ca.crt": "ca", "/var/lib/kubelet/config.json": "{}",
              "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt": "ca"}
NEW_BASE = "quay.io/ocp/base@sha256:" + "b" * 64
EXT = "quay.io/ocp/extensions@sha256:" + "e" * 64


def generated(files: dict[str, str]) -> dict[str, Any]:
    return source("00-worker", files, generated=True)


def _file(path: str, content: str) -> list[dict[str, Any]]:
    return [generated({**BASE_FILES, path: content})]


#: change kind -> (what replaces or joins the MachineConfigs, a policy entry of the administrator's,
#: a new base image): each row of docs/rollout.md's table, in its order
CHANGES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]] = {
    "an SSH key": ([source("99-worker-ssh", keys=["ssh-ed25519 AAAA admin"])], [], None),
    "the pull secret": (_file("/var/lib/kubelet/config.json", '{"auths":{}}'), [], None),
    "registries.conf, safe": (_file(REGISTRIES, OLD_REGISTRIES.replace(
        '"registry.access.redhat.com"]', '"registry.access.redhat.com", "docker.io"]')), [], None),
    "registries.conf, unsafe": (_file(REGISTRIES, 'unqualified-search-registries = ["registry.access.redhat.com"]\n'),
                                [], None),
    "policy.json": (_file("/etc/containers/policy.json", '{"default":[{"type":"reject"}]}'), [], None),
    "the user CA bundle": (_file("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", "ca2"),
                           [], None),
    "an administrator's policy entry (restart a service)": (
        [source("99-worker-myapp", {"/etc/myapp/app.conf": "x"})],
        [{"path": "/etc/myapp", "actions": [{"type": "Restart", "restart": {"serviceName": "myapp.service"}}]}], None),
    "a plain /etc file": ([source("99-worker-motd", {"/etc/motd": "hello"})], [], None),
    "the kubelet CA file": (_file("/etc/kubernetes/kubelet-ca.crt", "ca2"), [], None),
    "a systemd unit": ([source("99-worker-unit", units={"hello.service": "[Unit]\n"})], [], None),
    "a removed file": ([generated({k: v for k, v in BASE_FILES.items() if k != "/etc/base"})], [], None),
    "extensions": ([source("99-worker-ext", extensions=["usbguard"])], [], None),
    "kernel type": ([source("99-worker-rt", kernelType="realtime")], [], None),
    "kernel arguments": ([source("99-worker-karg", kernelArguments=["nosmt"])], [], None),
    "a cluster upgrade (new base image, new MCO MachineConfigs)": (
        _file("/etc/base", "base-next"), [], NEW_BASE),
}


@dataclass(frozen=True)
class Row:
    builds: int
    updates: int          # node updates per node
    reboots: int          # of them, those the daemon reboots for, per node
    actions: str          # what the daemon does on the update without reboot ("" when it reboots)
    drains: int = 0       # of those without reboot, the ones it drains for, per node


class _Cli:
    """`ocl-reconcile run --snapshot` in-process, as tests/conftest.Cli does."""

    def __init__(self, tmp: Path):
        self.tmp, self.n = tmp, 0

    def run(self, items):
        from reconcile import cli
        from reconcile.cluster import snapshot
        self.n += 1
        src, out = self.tmp / f"in{self.n}.yaml", self.tmp / f"out{self.n}.yaml"
        snapshot.write(str(src), items)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["run", "--snapshot", str(src), "--write-snapshot", str(out)])
        return code, snapshot.load(str(out)), err.getvalue()


def verdicts(binary: Path, pairs: list[tuple[dict, dict]], policies: dict[str, Any], tmp: Path) -> list[dict]:
    if not pairs:
        return []
    (tmp / "pairs.json").write_text(json.dumps([{"old": o, "new": n} for o, n in pairs]))
    (tmp / "mcop.json").write_text(json.dumps(ndp.machineconfiguration(policies)))
    out = subprocess.run([str(binary), "verdict", "--pairs", str(tmp / "pairs.json"), "--policies",
                          str(tmp / "mcop.json")], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"ocl-mco-harness verdict: {out.stderr.strip()}")
    found = json.loads(out.stdout)
    return found if isinstance(found, list) else [found]


_BEFORE: dict[tuple[str, str, str], list[dict[str, Any]]] = {}


def before(live: str, policies: dict[str, Any]) -> list[dict[str, Any]]:
    """The cluster built and rolled out before any change, with `liveChanges: live` and the
    administrator's `policies`: the same for every change kind that shares them, so made once per
    process (the runs are deterministic: the tests fix OCL_RECONCILE_NOW) and copied."""
    from tests.unit.test_gate import cluster, cycle
    key = (live, json.dumps(policies, sort_keys=True), os.environ.get("OCL_RECONCILE_NOW", ""))
    if key not in _BEFORE:
        with tempfile.TemporaryDirectory() as tmp:
            items = ndp.with_release(cluster(), "4.18.3")
            items = [o for o in items if not (o["kind"] == "MachineConfig" and o["metadata"]["name"] == "00-worker")]
            F.find(items, "ConfigMap", "on-cluster-build-config")[0]["data"]["liveChanges"] = live
            # extensions and the realtime kernel are installed from the release's extensions image
            F.find(items, "ConfigMap", "machine-config-osimageurl")[0]["data"]["baseOSExtensionsContainerImage"] = EXT
            items += [generated(BASE_FILES), ndp.machineconfiguration(policies)]
            _BEFORE[key] = cycle(_Cli(Path(tmp)), items, mconode.Counter())
    return copy.deepcopy(_BEFORE[key])


def measure(kind: str, live: str, binary: Path) -> Row:
    """One change kind, with `liveChanges: live` (apply or rebuild)."""
    from tests.unit.test_gate import cycle
    changed, entries, new_base = CHANGES[kind]
    policies = ndp.merged(files=entries)
    with tempfile.TemporaryDirectory() as tmp:
        cli = _Cli(Path(tmp))
        items = before(live, policies)
        started = {e["metadata"]["name"] for e in F.find(items, "Event") if e["reason"] == "BuildStarted"}
        names = {c["metadata"]["name"] for c in changed}
        items = [o for o in copy.deepcopy(items) if not (o["kind"] == "MachineConfig" and o["metadata"]["name"] in names)]
        items += copy.deepcopy(changed)
        base = F.BASE
        if new_base:
            base = new_base
            F.find(items, "ConfigMap", "machine-config-osimageurl")[0]["data"]["baseOSContainerImage"] = new_base
        counter = mconode.Counter()
        items = cycle(cli, items, counter, base=base)
        builds = len([e for e in F.find(items, "Event") if e["reason"] == "BuildStarted"
                      and e["metadata"]["name"] not in started])
        mcs = {o["metadata"]["name"]: o for o in items if o["kind"] == "MachineConfig"}
        pairs = [(mcs[u.from_config], mcs[u.to_config]) for u in counter]
        given = verdicts(binary, pairs, policies, Path(tmp))
    nodes = len({u.node for u in counter}) or 1
    reboots = sum(1 for v in given if v["reboot"])
    quiet = [v for v in given if not v["reboot"]]
    return Row(builds, len(counter) // nodes, reboots // nodes, said(quiet[0]["actions"]) if quiet else "",
               sum(1 for v in quiet if v["drain"]) // nodes)


def said(actions: list[dict[str, Any]]) -> str:
    out = []
    for a in actions:
        service = (a.get("reload") or a.get("restart") or {}).get("serviceName")
        out.append(f"{a['type'].lower()} {service}" if service else a["type"].lower())
    return ", ".join(sorted(out)) or "none"


def _mco_rendered(sources: list[dict[str, Any]], base: str) -> dict[str, Any]:
    """The worker pool's rendered config of these MachineConfigs as the render controller makes it
    (tests/support/mcorender.py, held to the real one by tests/realapi/test_realapi_mco_parity.py)."""
    from tests.unit.test_rollout import mco_pool
    items = mcorender.sync([mco_pool("worker", ("worker",)), *copy.deepcopy(sources)], base_image=base)
    return F.find(items, "MachineConfig", F.the_pool(items)["spec"]["configuration"]["name"])[0]


def mco_layering(kind: str, binary: Path) -> Row:
    """The MCO's own layering (4.20+): a build exactly when `RequiresRebuild(old, new)`, then one
    update whose verdict is the daemon's for the rendered configs it moves between (the image
    changes only with a build)."""
    changed, entries, new_base = CHANGES[kind]
    names = {c["metadata"]["name"] for c in changed}
    before = [generated(BASE_FILES)]
    old = _mco_rendered(before, F.BASE)
    new = _mco_rendered([m for m in before if m["metadata"]["name"] not in names] + changed, new_base or F.BASE)
    rebuild = (old["spec"]["osImageURL"] != new["spec"]["osImageURL"]
               or (old["spec"].get("kernelType") or "") != (new["spec"].get("kernelType") or "")
               or old["spec"].get("extensions") != new["spec"].get("extensions")
               or old["spec"].get("kernelArguments") != new["spec"].get("kernelArguments"))
    moved = copy.deepcopy(new)
    if rebuild:                           # the node boots the new image: an osImageURL change
        moved["spec"]["osImageURL"] = "registry.example.com/mco/os@sha256:" + "c" * 64
    with tempfile.TemporaryDirectory() as tmp:
        (verdict,) = verdicts(binary, [(old, moved)], ndp.merged(files=entries), Path(tmp))
    return Row(int(rebuild), 1, int(verdict["reboot"]), "" if verdict["reboot"] else said(verdict["actions"]),
               int(verdict["drain"] and not verdict["reboot"]))


def table(binary: Path) -> list[tuple[str, Row, Row, Row]]:
    """(change kind, this version, today's version (liveChanges: rebuild), the MCO's own layering)."""
    os.environ.setdefault("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return [(kind, measure(kind, "apply", binary), measure(kind, "rebuild", binary), mco_layering(kind, binary))
            for kind in CHANGES]


def cell(row: Row) -> str:
    what = f", {row.actions}" if row.actions and not row.reboots else ""
    what += ", drain" if row.drains else ""
    return f"{row.builds} build{'s' if row.builds != 1 else ''}, {row.reboots} reboot{'s' if row.reboots != 1 else ''}{what}"


def markdown(rows: list[tuple[str, Row, Row, Row]]) -> str:
    lines = ["| change | this version (`liveChanges: apply`) | `liveChanges: rebuild` (the version before) "
             "| the MCO's own layering (4.20+) |", "|---|---|---|---|"]
    lines += [f"| {kind} | {cell(a)} | {cell(b)} | {cell(c)} |" for kind, a, b, c in rows]
    return "\n".join(lines)
