"""The MCO's own render and node controllers on the realapi suite's kube-apiserver, and its daemon's
reboot rule: `ocl-mco-harness` (tests/tools/mco/, built by `make mco` from ../shared/mco/mco-src.tar.gz,
openshift/machine-config-operator at 7ff337a4). The test plays what cannot run here: the daemon on
each node (`Daemon`), which moves a node to its desiredConfig and asks the harness what the real
daemon would have done for that move (a reboot, or which reload, restart or none).

What the controllers need, installed by `install` (read in the MCO's code; a missing informer CRD
means `node.Controller.Run` never starts):
- the CRDs of the Default feature set of a self-managed cluster from the tarball's vendored
  openshift/api `zz_generated.crd-manifests` (`CRDS`); the realapi server already serves
  MachineConfig, MachineConfigPool and OSImageStream from ../shared/schemas, kept as they are;
- the ControllerConfig `machine-config-controller`, Completed and observed
  (`apihelpers.IsControllerConfigCompleted`), which both controllers get from their lister;
- the MachineConfiguration `cluster` with status.nodeDisruptionPolicyStatus as the operator writes it
  (`apihelpers.MergeClusterPolicies` of an empty spec, printed by the harness) and its generation
  observed, as the daemon waits for;
- the OSImageStream `cluster` annotated with the harness's controller version (the render controller
  ignores it otherwise, render_controller.go `getOSImageStreamForPool`) and a status listing the
  default stream, whose osImage is the release's base image (`F.BASE`), as the osimagestream
  controller fills it (it does not run here).
The harness runs with a nil images inspector factory (no image is inspected), hard-coded feature
gates of the Default set (OSStreams on, ImageModeStatusReporting off: the node controller counts
updated machines from the Nodes' annotations, `GetMachinesByState`), no leader election and an
update delay of 200 ms instead of 5 s, and its render controller's fixed `renderDelay` is 500 ms
instead of 5 s (tests/tools/mco/render/zz_ocl_render_delay.go). `settle` knows when both controllers
are done from their work queues (`GET /queues`, tests/tools/mco/cmd/ocl-mco-harness/queues.go)
instead of waiting out a quiet period longer than their delays.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconcile.contract import yamlio
from tests.support import factory as F
from tests.support import mconode as N
from tests.support import requirement

#: .ci/run sets OCL_MCO=require: a missing harness then fails the suite instead of skipping it
REQUIRE = "OCL_MCO"
TARBALL = F.SHARED / "mco/mco-src.tar.gz"
TOOLS = F.ROOT / "tests/tools/mco"
MCO = F.MCO
DESIRED, CURRENT, STATE, REASON = (f"{MCO}/desiredConfig", f"{MCO}/currentConfig", f"{MCO}/state",
                                   f"{MCO}/reason")
RELEASE_IMAGE_VERSION = f"{MCO}/release-image-version"    # ctrlcommon.ReleaseImageVersionAnnotationKey
KUBELET_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
#: the CRDs the two controllers' informers list (by metadata.name), beyond those realserver serves
CRDS = ("controllerconfigs.machineconfiguration.openshift.io",
        "machineconfignodes.machineconfiguration.openshift.io",
        "machineosconfigs.machineconfiguration.openshift.io",
        "machineosbuilds.machineconfiguration.openshift.io",
        "containerruntimeconfigs.machineconfiguration.openshift.io",
        "kubeletconfigs.machineconfiguration.openshift.io",
        "machineconfigurations.operator.openshift.io",
        "infrastructures.config.openshift.io",
        "schedulers.config.openshift.io",
        "imagecontentsourcepolicies.operator.openshift.io",
        "imagedigestmirrorsets.config.openshift.io",
        "imagetagmirrorsets.config.openshift.io",
        "images.config.openshift.io")
PROFILE = "include.release.openshift.io/self-managed-high-availability"
FEATURE_SET = "release.openshift.io/feature-set"
CC_PATH = f"/apis/{MCO}/v1/controllerconfigs"
MCOP_PATH = "/apis/operator.openshift.io/v1/machineconfigurations"
MCN_PATH = f"/apis/{MCO}/v1/machineconfignodes"


# finding the harness --------------------------------------------------------------------------
def _missing(problem: str) -> None:
    requirement.missing(REQUIRE, problem)


def cache_dir() -> Path:
    """build.sh's folder: the cache root, then mco-<first 12 hex of the tarball's sha256>."""
    root = Path(os.environ.get("OCL_MCO_CACHE") or Path.home() / ".cache/ocl-reconciler")
    digest = hashlib.sha256()
    with open(os.environ.get("OCL_MCO_SRC") or TARBALL, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return root / f"mco-{digest.hexdigest()[:12]}"


def source_stamp() -> str:
    """The stamp build.sh writes beside the binary: `find cmd daemon render -name '*.go' | sort | xargs
    sha256sum | sha256sum`, its first 16 hex digits."""
    files = sorted(str(p.relative_to(TOOLS)) for d in ("cmd", "daemon", "render") for p in (TOOLS / d).rglob("*.go"))
    listing = "".join(f"{hashlib.sha256((TOOLS / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(listing.encode()).hexdigest()[:16]


def harness() -> Path:
    """The built harness, or skip saying why (fail where OCL_MCO=require)."""
    tarball = Path(os.environ.get("OCL_MCO_SRC") or TARBALL)
    if not tarball.is_file():
        _missing(f"the MCO's own controllers need ../shared/mco/mco-src.tar.gz (absent: {tarball})")
    folder = cache_dir()
    binary = folder / "ocl-mco-harness"
    if not binary.is_file():
        _missing(f"the MCO's own controllers need {binary}: `make mco` builds it (needs go)")
    stamp = folder / "ocl-mco-harness.source"
    if not stamp.is_file() or stamp.read_text().strip() != source_stamp():
        _missing(f"{binary} was built from other harness sources than tests/tools/mco/: `make mco` rebuilds it")
    return binary


def version(binary: Path) -> dict[str, str]:
    """{"hash": pkg/version.Hash, "raw": pkg/version.Raw} of the built harness."""
    return json.loads(subprocess.run([str(binary), "version"], capture_output=True, text=True, check=True,
                                     timeout=30).stdout)


def default_policies(binary: Path) -> dict[str, Any]:
    """`apihelpers.MergeClusterPolicies` of an empty spec: the MCO's built-in node disruption
    policies, as the operator writes them into MachineConfiguration `cluster`'s status."""
    out = subprocess.run([str(binary), "policies"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"ocl-mco-harness policies: {out.stderr.strip()}")
    return json.loads(out.stdout)


def _header(path: Path) -> dict[str, Any]:
    """A manifest's metadata only: the text before `spec:` (a CRD's metadata comes first), so that of
    the vendored openshift/api's 167 manifests (8 MB) only the few of `CRDS` are parsed whole."""
    head = []
    with open(path) as fh:
        for line in fh:
            if line.startswith("spec:"):
                break
            head.append(line)
    return yamlio.load("".join(head)).get("metadata") or {}


def crds(src: Path) -> list[dict[str, Any]]:
    """`CRDS` as the Default feature set of a self-managed cluster installs them: each manifest of
    the vendored openshift/api included for that profile whose feature-set annotation is absent or
    lists Default."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((src / "vendor/github.com/openshift/api").glob("*/*/zz_generated.crd-manifests/*.yaml")):
        md = _header(path)
        ann = md.get("annotations") or {}
        sets = [s.strip() for s in str(ann.get(FEATURE_SET, "Default")).split(",")]
        if md.get("name") in CRDS and ann.get(PROFILE) == "true" and "Default" in sets:
            found.setdefault(md["name"], yamlio.load(path.read_text()))
    missing = sorted(set(CRDS) - set(found))
    if missing:
        raise RuntimeError(f"no Default manifest of {missing} in {src}")
    return [found[name] for name in CRDS]


# what the controllers read ----------------------------------------------------------------------
def controller_config(raw_version: str, base_image: str = F.BASE) -> dict[str, Any]:
    """The ControllerConfig the operator writes (only what its CRD requires, and the base images),
    annotated with the operator's version: the render controller ignores it otherwise
    (`generateRenderedMachineConfig`, "ignoring controller config generated without ...")."""
    infra = {"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
             "spec": {"cloudConfig": {"name": ""}, "platformSpec": {"type": "None"}},
             "status": {"platform": "None", "platformStatus": {"type": "None"},
                        "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
                        "infrastructureName": "ocl-test", "apiServerURL": "https://127.0.0.1:6443",
                        "apiServerInternalURI": "https://127.0.0.1:6443", "etcdDiscoveryDomain": ""}}
    return {"apiVersion": f"{MCO}/v1", "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller",
                         "annotations": {f"{MCO}/generated-by-version": raw_version}},
            "spec": {"additionalTrustBundle": None, "baseOSContainerImage": base_image,
                     "baseOSExtensionsContainerImage": "", "cloudProviderCAData": None,
                     "cloudProviderConfig": "", "clusterDNSIP": "10.0.0.10",
                     "dns": {"apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"},
                             "spec": {"baseDomain": "example.com"}, "status": {}},
                     "images": {}, "infra": infra, "ipFamilies": "IPv4",
                     "kubeAPIServerServingCAData": "b2NsLXRlc3Q=", "network": None, "proxy": None,
                     "releaseImage": "quay.io/ocp/release@sha256:" + "c" * 64, "rootCAData": "b2NsLXRlc3Q="}}


def stream_status(base_image: str = F.BASE) -> dict[str, Any]:
    """The OSImageStream `cluster`'s status with the default stream only, whose osImage is the
    release's base image (the osimagestream controller fills it from the release's image labels)."""
    return {"defaultStream": "rhel-9", "availableStreams": [
        {"name": "rhel-9", "osImage": base_image, "osExtensionsImage": F.stream_images("rhel-9")[1]}]}


class Installed:
    """What `install` put on one server (once per server: the objects survive realserver.reset())."""

    def __init__(self, api: Any, binary: Path):
        self.api, self.binary = api, binary
        self.versions = version(binary)
        self.version = self.versions["hash"]
        self.policies = default_policies(binary)
        api.add_crds([c for c in crds(cache_dir() / "src")
                      if api.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                            f"{c['metadata']['name']}", ok=(404,))[0] == 404])
        self._controller_config()
        self._machine_configuration()

    def _controller_config(self) -> None:
        status, cc = self.api.request("POST", CC_PATH, controller_config(self.versions["raw"]), ok=(409,))
        if status == 409:
            cc = self.api.request("GET", f"{CC_PATH}/machine-config-controller")[1]
        cc["status"] = {"observedGeneration": cc["metadata"].get("generation", 1), "conditions": [
            {"type": t, "status": s, "lastTransitionTime": "2026-11-29T12:00:00Z", "reason": "", "message": ""}
            for t, s in (("TemplateControllerCompleted", "True"), ("TemplateControllerRunning", "False"),
                         ("TemplateControllerFailing", "False"))]}
        self.api.request("PUT", f"{CC_PATH}/machine-config-controller/status", cc)

    def _machine_configuration(self) -> None:
        body = {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
                "metadata": {"name": "cluster"}, "spec": {"managementState": "Managed"}}
        status, mcop = self.api.request("POST", MCOP_PATH, body, ok=(409,))
        if status == 409:
            mcop = self.api.request("GET", f"{MCOP_PATH}/cluster")[1]
        mcop["status"] = {"observedGeneration": mcop["metadata"].get("generation", 1),
                          "nodeDisruptionPolicyStatus": {"clusterPolicies": self.policies}}
        self.api.request("PUT", f"{MCOP_PATH}/cluster/status", mcop)

    def streams(self, base_image: str = F.BASE, status: dict[str, Any] | None = None) -> None:
        """The OSImageStream `cluster` with the harness's version and a status (by default the
        release's base image as the default stream's)."""
        path = self.api.path("OSImageStream", "", "cluster")
        live = self.api.request("GET", path)[1]
        live["metadata"].setdefault("annotations", {})[RELEASE_IMAGE_VERSION] = self.version
        live = self.api.request("PUT", path, live)[1]
        self.api.write_streams(dict(live, status=status or stream_status(base_image)))


# the controllers --------------------------------------------------------------------------------
class Controllers:
    """One `ocl-mco-harness run` process; `stop()` always ends it (SIGTERM, then SIGKILL)."""

    READY = ("Starting MachineConfigController-RenderController", "Starting MachineConfigController-NodeController")

    def __init__(self, installed: Installed, root: Path, feature_set: str = "Default"):
        self.installed, self.root, self.feature_set = installed, root, feature_set
        self.log = root / f"ocl-mco-harness-{feature_set}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.queues = ""

    def start(self, timeout: float = 60) -> Controllers:
        kubeconfig = self.installed.api.kubeconfig(self.root / "mco.kubeconfig")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(self.installed.binary), "run", "--kubeconfig", kubeconfig,
                                          "--update-delay", "200ms", "--feature-set", self.feature_set],
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while not all(line in self.text() for line in self.READY):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"ocl-mco-harness exited {self.proc.returncode}: {self.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the MCO's controllers did not start within {timeout} s: {self.tail()}")
                time.sleep(0.1)
            self.queues = re.search(r"queues on (http://127\.0\.0\.1:\d+/queues)", self.text()).group(1)
        except BaseException:
            self.stop()
            raise
        return self

    def idle(self) -> bool:
        """Both controllers' work queues are idle: nothing waits, nothing is synced, and no delayed
        add (the render delay, the update delay) is still pending (`GET /queues`, the harness's
        queues.go, counted by client-go's workqueue metrics)."""
        with urllib.request.urlopen(self.queues, timeout=5) as answer:
            return bool(json.load(answer)["idle"])

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 15) -> str:
        return " | ".join(self.text().splitlines()[-lines:])

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass


# the daemon, played ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    """One node moved from `from_config` to `to_config`, and what the real daemon would have done."""
    node: str
    from_config: str
    to_config: str
    from_image: str
    to_image: str
    verdict: dict[str, Any]

    @property
    def reboot(self) -> bool:
        return bool(self.verdict["reboot"])

    @property
    def os_changed(self) -> bool:
        return self.from_image != self.to_image


class Moves(N.Counter):
    """Every move the played daemon made, in order (`updates`), counted as mconode's counter counts
    the imitation's, and the reboots the real daemon's rule gives them."""

    @property
    def reboots(self) -> int:
        return sum(m.reboot for m in self.updates)


def _name(obj: dict[str, Any]) -> str:
    return obj["metadata"]["name"]


def _ann(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


class Daemon:
    """The machine-config daemon of every Node, played: a booted node (`boot`) takes its pool's
    rendered config as the Machine Config Server serves it; a node whose desiredConfig differs from
    its currentConfig goes Working, then gets currentConfig = desiredConfig and state Done
    (pkg/daemon/writer.go `SetDone`). For every move the harness gives the real daemon's verdict."""

    def __init__(self, installed: Installed, tmp: Path):
        self.installed, self.api, self.tmp = installed, installed.api, tmp
        self.kubeconfig = installed.api.kubeconfig(tmp / "daemon.kubeconfig")
        #: how many more moves the daemons make (None: all): a node beyond it stays on its current
        #: config, targeted but not done, as a node still draining or rebooting
        self.limit: int | None = None
        #: writes made so far (settle: a round that wrote is no quiet one)
        self.writes = 0

    def _patch(self, node: str, annotations: dict[str, str | None]) -> None:
        self.writes += 1
        self.api.request("PATCH", self.api.path("Node", "", node), {"metadata": {"annotations": annotations}},
                         content_type="application/strategic-merge-patch+json")

    def ready(self, node: dict[str, Any]) -> None:
        """What a kubelet gives its Node: the annotation it registers with (kubelet_node_status.go;
        the node controller writes node.Annotations[...] without making the map,
        `setClusterConfigAnnotation`, and panics on a Node without annotations) and the Ready
        condition (the node controller counts only ready nodes as available)."""
        if KUBELET_ANNOTATION not in _ann(node):
            self._patch(_name(node), {KUBELET_ANNOTATION: "true"})
        conditions = (node.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return
        # a patch, as the kubelet writes its status: a PUT of what was read loses the race (409)
        # with the node controller writing the Node's annotations meanwhile
        self.writes += 1
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                 "lastHeartbeatTime": "2026-11-29T12:00:00Z", "lastTransitionTime": "2026-11-29T12:00:00Z"}
        self.api.request("PATCH", self.api.path("Node", "", _name(node)) + "/status",
                         {"status": {"conditions": [ready]}},
                         content_type="application/strategic-merge-patch+json")

    def _pool(self, node: dict[str, Any]) -> str:
        """The pool whose rendered config the node's desiredConfig names (rendered-<pool>-<hash>)."""
        return _ann(node).get(DESIRED, "").removeprefix("rendered-").rpartition("-")[0]

    def boot(self, seen: Seen | None = None) -> list[str]:
        """Nodes the daemon never ran on: ready, and currentConfig = desiredConfig = the rendered
        config of the pool that selects them (pkg/server/server.go `getNodeAnnotation`)."""
        seen = seen or Seen(self.api)
        pools = seen.pools
        booted = []
        for node in seen.nodes:
            self.ready(node)
            if _ann(node).get(CURRENT):
                continue
            labels = node["metadata"].get("labels") or {}
            for pool in pools:
                want = (pool["spec"].get("nodeSelector") or {}).get("matchLabels") or {}
                target = (pool["spec"].get("configuration") or {}).get("name", "")
                if want and all(labels.get(k) == v for k, v in want.items()) and \
                        target in seen.mcs and target.startswith("rendered-"):
                    self._patch(_name(node), {CURRENT: target, DESIRED: target, STATE: "Done"})
                    self.machine_config_node(_name(node), _name(pool), target, target)
                    booted.append(_name(node))
                    break
        return booted

    def machine_config_node(self, node: str, pool: str, current: str, desired: str) -> None:
        """The node's MachineConfigNode as the daemon leaves it after an update
        (pkg/upgrademonitor/upgrade_monitor.go `GenerateAndApplyMachineConfigNodes`): spec.configVersion
        the desired config, status.configVersion current and desired, and the conditions the node
        controller reads (`calculateStatus`, node/status.go: Updated True counts the machine as updated
        where ImageModeStatusReporting is on; NodeDegraded True counts it degraded)."""
        conditions = [
            {"type": t, "status": v, "reason": t, "message": "", "lastTransitionTime": "2026-11-29T12:00:00Z"}
            for t, v in (("Updated", "True" if current == desired else "False"), ("UpdatePrepared", "False"),
                         ("UpdateExecuted", "False"), ("UpdatePostActionComplete", "False"),
                         ("UpdateComplete", "False"), ("Resumed", "False"), ("NodeDegraded", "False"))]
        body = {"apiVersion": f"{MCO}/v1", "kind": "MachineConfigNode", "metadata": {"name": node},
                "spec": {"node": {"name": node}, "pool": {"name": pool}, "configVersion": {"desired": desired}}}
        status, live = self.api.request("GET", f"{MCN_PATH}/{node}", ok=(404,))
        if status == 404:
            live = self.api.request("POST", MCN_PATH, body)[1]
        elif live["spec"] != body["spec"]:
            live = self.api.request("PUT", f"{MCN_PATH}/{node}", dict(live, spec=body["spec"]))[1]
        live["status"] = {"observedGeneration": live["metadata"].get("generation", 1), "conditions": conditions,
                          "configVersion": {"current": current, "desired": desired}}
        self.api.request("PUT", f"{MCN_PATH}/{node}/status", live)

    def verdicts(self, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
        """The real daemon's verdicts (`ocl-mco-harness verdict --pairs`) for these moves, with the
        cluster's node disruption policies read from MachineConfiguration `cluster`."""
        if not pairs:
            return []
        path = self.tmp / f"pairs-{time.monotonic_ns()}.json"
        path.write_text(json.dumps([{"old": o, "new": n} for o, n in pairs]))
        out = subprocess.run([str(self.installed.binary), "verdict", "--pairs", str(path),
                              "--kubeconfig", self.kubeconfig], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"ocl-mco-harness verdict: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def step(self, moves: Moves | None = None, seen: Seen | None = None) -> list[Move]:
        """Every node with a pending desiredConfig updates to it. Returns (and records) the moves."""
        seen = seen or Seen(self.api)
        mcs = seen.mcs
        pending = []
        for node in seen.nodes:
            ann = _ann(node)
            desired, current = ann.get(DESIRED, ""), ann.get(CURRENT, "")
            if desired and current and desired != current and desired in mcs and current in mcs:
                pending.append((_name(node), current, desired, self._pool(node)))
        if self.limit is not None:
            pending, self.limit = pending[:self.limit], max(0, self.limit - len(pending))
        verdicts = self.verdicts([(mcs[c], mcs[d]) for _, c, d, _ in pending])
        done = []
        for (node, current, desired, pool), verdict in zip(pending, verdicts, strict=True):
            self._patch(node, {STATE: "Working"})
            self.machine_config_node(node, pool, current, desired)
            self._patch(node, {CURRENT: desired, STATE: "Done", REASON: ""})
            self.machine_config_node(node, pool, desired, desired)
            done.append(Move(node, current, desired, mcs[current]["spec"].get("osImageURL", ""),
                             mcs[desired]["spec"].get("osImageURL", ""), verdict))
        if moves is not None:
            moves.updates.extend(done)
        return done


class Seen:
    """The pools, Nodes and MachineConfigs, each LISTed once: what one round of settle's polling
    reads (it polled with eight LISTs a round, two of every MachineConfig, each 0.15 s)."""

    def __init__(self, api: Any):
        self.pools = api.list("MachineConfigPool")
        self.nodes = api.list("Node")
        self.mcs = {_name(mc): mc for mc in api.list("MachineConfig")}


def _fingerprint(seen: Seen) -> tuple[str, str]:
    """(what the controllers may still change, the MachineConfigs not rendered by them): pools,
    nodes and rendered configs; the other MachineConfigs, whose change starts the render delay."""
    def strip(o: dict[str, Any]) -> Any:
        o = copy.deepcopy(o)
        o["metadata"] = {k: v for k, v in o["metadata"].items() if k not in ("resourceVersion", "managedFields")}
        status = o.get("status") or {}
        for c in status.get("conditions") or []:
            c.pop("lastTransitionTime", None)
            c.pop("lastHeartbeatTime", None)
        if "conditions" in status:
            status["conditions"] = sorted(status["conditions"], key=lambda c: c.get("type", ""))
        return o
    mcs = list(seen.mcs.values())
    rendered = [m for m in mcs if any(r.get("kind") == "MachineConfigPool"
                                      for r in m["metadata"].get("ownerReferences") or [])]
    sources = [m for m in mcs if m not in rendered]
    watched = [*seen.pools, *seen.nodes, *rendered]
    return (json.dumps(sorted((strip(o) for o in watched), key=lambda o: (o["kind"], _name(o))), sort_keys=True),
            json.dumps(sorted((_name(m), m["metadata"].get("generation")) for m in sources)))


def observed(seen: Seen) -> bool:
    """The node controller has synced every pool since its last spec change: it writes
    status.observedGeneration = metadata.generation on each sync (status.go `calculateStatus`), so
    an unpause, a pause or a new rendered config is not taken for "nothing to do" before it acted."""
    return all((p.get("status") or {}).get("observedGeneration") == p["metadata"].get("generation")
               for p in seen.pools if (p["spec"].get("configuration") or {}).get("name"))


class Unsettled(AssertionError):
    """The controllers and the played daemon kept changing things."""


#: how long the cluster stays unchanged, with the controllers' queues idle, before settle returns; also
#: the least time after the call, so that the controllers' informers have seen what the caller wrote
#: (the render delay starts only then)
QUIET = 0.5


def settle(api: Any, daemon: Daemon, controllers: Controllers, moves: Moves | None = None,
           timeout: float = 90, quiet: float = QUIET) -> Moves:
    """Let the real controllers and the played daemon run until they are done: no node pending, no
    change for `quiet` seconds (nor since this call: a caller may have changed a MachineConfig just
    before), every pool's generation observed by the node controller, and both controllers' work
    queues idle (`Controllers.idle`: nothing queued or synced and no render or update delay still
    running). Returns the moves."""
    moves = moves if moves is not None else Moves()
    deadline = time.monotonic() + timeout
    state = _fingerprint(Seen(api))
    changed = time.monotonic()
    while time.monotonic() < deadline:
        if controllers.proc is None or controllers.proc.poll() is not None:
            raise Unsettled("the MCO's controllers exited")
        seen, writes = Seen(api), daemon.writes
        now_state, synced = _fingerprint(seen), observed(seen)     # as read, before the daemon acts
        daemon.boot(seen)
        daemon.step(moves, seen)
        now = time.monotonic()
        if now_state != state or daemon.writes != writes:      # what it wrote is read next round
            state, changed = now_state, now
        if now - changed >= quiet and synced and controllers.idle():
            return moves
        time.sleep(0.15)
    raise Unsettled(f"still changing after {timeout} s; {len(moves)} node moves so far")


def as_created(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as it is created on a cluster where the MCO runs: a Node as its kubelet registers
    it (with the kubelet's annotation: the node controller writes node.Annotations[...] without
    making the map, `setClusterConfigAnnotation` in node_controller.go, and a Node without
    annotations panics it), a MachineConfigPool as an administrator writes it (no
    spec.configuration: the render controller sets it)."""
    obj = copy.deepcopy(obj)
    md = obj.setdefault("metadata", {})
    if obj.get("kind") == "Node":
        md["annotations"] = {KUBELET_ANNOTATION: "true", **(md.get("annotations") or {})}
    if obj.get("kind") == "MachineConfigPool":
        (obj.get("spec") or {}).pop("configuration", None)
    return obj


@dataclass
class Cluster:
    """A test's view of the MCO: the controllers' process and the played daemon."""
    controllers: Controllers
    daemon: Daemon

    def settle(self, moves: Moves | None = None, timeout: float = 90) -> Moves:
        try:
            return settle(self.daemon.api, self.daemon, self.controllers, moves, timeout)
        except Unsettled as err:
            raise Unsettled(f"{err}; the controllers' log: {self.controllers.tail()}") from None
