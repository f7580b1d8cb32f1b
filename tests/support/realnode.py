"""Harness for the realnode suite: one real node beside a real kube-apiserver, all on this machine.

What runs (`../shared/reference/realnode.md` says what this machine forces, and why each setting):
- the kube-apiserver and etcd of the realapi suite (tests/support/realserver.py), a server of the
  node's own: its controllers would act on the other suites' objects;
- kube-controller-manager and kube-scheduler of the same release (`make realnode`), with the
  controllers our objects need (ServiceAccount, Job, CronJob, the garbage collector, PersistentVolume
  binding: its defaults);
- containerd and runc from Debian, with a pause image made here (busybox, no registry), and the
  CNI bridge plugin on a bridge of the node's own;
- the kubelet, on 127.0.0.1 with its own root, port and cgroup root (two workers may each run one).

A Pod reaches the API server as in a cluster, at the `kubernetes` Service's ClusterIP (10.0.0.1:443,
the first address of --service-cluster-ip-range): there is no kube-proxy, so one DNAT rule on the
node's bridge sends that address to the server on 127.0.0.1 (route_localnet on the bridge lets a
routed packet reach a loopback address, as kube-proxy's own localhost NodePorts do). Nothing
listens beyond 127.0.0.1. stop() leaves no process, mount, cgroup, bridge or rule behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support import nodeteardown, realserver, requirement
from tests.support.imagearchive import PAUSE, pause_image

REQUIRE = "OCL_REALNODE"
NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler")
HOST_TOOLS = {"containerd": "containerd", "ctr": "containerd", "runc": "runc", "iptables": "iptables",
              "busybox": "busybox-static"}
CNI_DIR = Path("/usr/lib/cni")
#: the kubernetes Service's address as a Pod sees it (--service-cluster-ip-range 10.0.0.0/24)
SERVICE_IP, SERVICE_PORT = "10.0.0.1", 443
#: the kube-apiserver's flags the node needs: logs and exec through the kubelet's InternalIP
APISERVER_ARGS = ("--kubelet-preferred-address-types=InternalIP",)


def _missing(problem: str) -> None:
    requirement.missing(REQUIRE, problem)


def prerequisites() -> Path:
    """The cache folder with the node's binaries, or skip (fail where required) saying what is missing."""
    bindir = realserver.binaries()
    missing = [b for b in NODE_BINARIES if not (bindir / b).is_file()]
    if missing:
        _missing(f"realnode needs {', '.join(missing)} in {bindir}: `make realnode` builds them")
    tools = sorted({pkg for tool, pkg in HOST_TOOLS.items() if not shutil.which(tool)})
    if tools or not (CNI_DIR / "bridge").is_file():
        tools += [] if (CNI_DIR / "bridge").is_file() else ["containernetworking-plugins"]
        _missing(f"realnode needs the Debian packages {', '.join(tools)} (.ci/run installs them)")
    if os.geteuid() != 0:
        _missing("realnode needs root (containerd, the kubelet, a bridge and a DNAT rule)")
    return bindir


def _containerd_config(root: Path, bridge_conf: Path) -> str:
    return f"""version = 2
root = "{root}/root"
state = "{root}/state"
[grpc]
  address = "{root}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_DIR}"
    conf_dir = "{bridge_conf}"
"""


def _kubelet_config(node: Node) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False,               # cgroup v1 here; kubelet 1.35 refuses it outright
        "cgroupDriver": "cgroupfs",          # no systemd as init
        "cgroupRoot": f"/{node.name}",       # a second kubelet (the other worker's) has its own
        "enforceNodeAllocatable": [],        # it cannot make the node-allocatable cgroups here
        "address": "127.0.0.1", "port": node.kubelet_port, "readOnlyPort": 0, "healthzPort": 0,
        # the API server calls the kubelet without a client certificate (logs, exec); only this
        # machine reaches 127.0.0.1
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{node.root}/containerd/containerd.sock",
        "podLogsDir": str(node.root / "pod-logs"),
        "failSwapOn": False, "registerNode": True, "resolvConf": "/etc/resolv.conf",
        # the disk is shared with the rest of the machine: evict only when it is nearly full
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "nodeStatusUpdateFrequency": "2s", "syncFrequency": "5s", "fileCheckFrequency": "5s",
        "serializeImagePulls": False, "maxPods": 30,
    }


class Node:
    """A started node (start()); `api` is its kube-apiserver. stop() undoes everything start() did."""

    def __init__(self, root: Path, bindir: Path, index: int):
        self.root, self.bindir, self.index = root, bindir, index
        self.name = f"ocl-node-{index}"
        # not 10.88/16, podman's and buildah's default network
        self.bridge, self.subnet = f"oclbr{index}", f"10.{150 + index % 100}.0"
        self.kubelet_port = realserver.free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.api: realserver.RealAPI | None = None
        self._rules: list[list[str]] = []
        self.kubelet_settings: dict[str, Any] = {}      # over _kubelet_config's (restart_kubelet)
        self._lock: Any = None

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> Node:
        started = time.monotonic()
        self._take_index()
        try:
            self.api = realserver.RealAPI(self.root / "api", self.bindir, APISERVER_ARGS)
            (self.root / "api").mkdir()
            self.api.start()
            self.api.install_mco_policies()
            self.admin = self.api.kubeconfig(self.root / "admin.kubeconfig")
            self._start_controllers()
            self._start_network()
            self._start_containerd()
            self._start_kubelet()
            self.wait_ready(time.monotonic() + 90)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _take_index(self) -> None:
        """The index (bridge, subnet, cgroup root, rules) is this node's alone on the machine: two
        sessions of one index would take each other's bridge and kill each other's Pods."""
        self._lock = open(f"/run/lock/ocl-realnode-{self.index}.lock", "w")    # noqa: SIM115
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise RuntimeError(f"node index {self.index} is in use by another test session on this machine: "
                               f"give this one another OCL_REALNODE_OFFSET") from None

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with open(self.root / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def _start_controllers(self) -> None:
        certs = self.root / "api/certs"
        self._spawn("kube-controller-manager", [
            str(self.bindir / "kube-controller-manager"), "--kubeconfig", self.admin,
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={realserver.free_port()}",
            "--service-account-private-key-file", str(certs / "sa.key"),
            "--root-ca-file", str(certs / "apiserver.crt"),
            "--controllers=*", "--concurrent-job-syncs=5", "-v", "1"])
        self._spawn("kube-scheduler", [
            str(self.bindir / "kube-scheduler"), "--kubeconfig", self.admin, "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={realserver.free_port()}", "-v", "1"])

    def rule(self, chain: str, *spec: str) -> list[str]:
        """A nat rule of this node: tagged with its name, so that stop() (or the next session of this
        index, after a killed one) finds every rule it made."""
        return [chain, "-m", "comment", "--comment", self.name, *spec]

    def _start_network(self) -> None:
        """The node's bridge, made before the CNI plugin (which takes it as it is), and the DNAT
        of the kubernetes Service to the API server."""
        gateway = f"{self.subnet}.1"
        run = lambda *a: subprocess.run(a, check=True, capture_output=True, timeout=30)  # noqa: E731
        with contextlib.suppress(subprocess.CalledProcessError):
            run("ip", "link", "del", self.bridge)          # a killed run's leftover
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{gateway}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        Path(f"/proc/sys/net/ipv4/conf/{self.bridge}/route_localnet").write_text("1")
        # the node's InternalIP is its gateway (the kubelet refuses a loopback node IP): the API
        # server's calls to the kubelet there (logs, exec) go to the kubelet on 127.0.0.1
        self._remove_rules()                               # a killed session's leftovers
        self._rules = [self.rule("PREROUTING", "-i", self.bridge, "-d", SERVICE_IP, "-p", "tcp", "--dport",
                                 str(SERVICE_PORT), "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.api.port}"),
                       self.rule("OUTPUT", "-d", gateway, "-p", "tcp", "--dport", str(self.kubelet_port),
                                 "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.kubelet_port}")]
        for rule in self._rules:
            run("iptables", "-t", "nat", "-A", *rule)
        conf = self.root / "cni"
        conf.mkdir()
        (conf / "10-ocl.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0", "name": self.bridge,
            "plugins": [{"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False,
                         "ipam": {"type": "host-local", "dataDir": str(self.root / "cni-ipam"),
                                  "ranges": [[{"subnet": f"{self.subnet}.0/24", "gateway": gateway}]],
                                  "routes": [{"dst": "0.0.0.0/0"}]}},
                        {"type": "loopback"}]}))

    def _start_containerd(self) -> None:
        root = self.root / "containerd"
        root.mkdir()
        (root / "config.toml").write_text(_containerd_config(root, self.root / "cni"))
        self._spawn("containerd", ["containerd", "--config", str(root / "config.toml"), "--log-level", "warn"])
        deadline = time.monotonic() + 30
        while self.ctr("version", check=False).returncode != 0:
            self._alive("containerd")
            if time.monotonic() > deadline:
                raise RuntimeError(f"containerd not ready: {self.tail('containerd')}")
            time.sleep(0.2)
        self.import_image(pause_image(self.root / "pause.tar"))

    def _make_cgroups(self) -> None:
        """The kubelet's cgroup root, in every v1 hierarchy (it does not make it itself); a new
        cpuset starts with no CPU or memory node, so it takes its parent's."""
        for controller in Path("/sys/fs/cgroup").iterdir():
            if controller.is_dir() and not controller.is_symlink() and controller.name != "unified":
                (controller / self.name).mkdir(exist_ok=True)
        cpuset = Path("/sys/fs/cgroup/cpuset")
        for key in ("cpuset.cpus", "cpuset.mems"):
            if (cpuset / key).exists():
                (cpuset / self.name / key).write_text((cpuset / key).read_text())

    def _start_kubelet(self) -> None:
        self._make_cgroups()
        (self.root / "kubelet.yaml").write_text(yaml.safe_dump({**_kubelet_config(self), **self.kubelet_settings}))
        self._spawn("kubelet", [
            str(self.bindir / "kubelet"), "--config", str(self.root / "kubelet.yaml"),
            "--kubeconfig", self.admin, "--root-dir", str(self.root / "kubelet"),
            "--cert-dir", str(self.root / "kubelet-pki"), "--node-ip", f"{self.subnet}.1",
            "--hostname-override", self.name, "-v", "1"])

    def restart_apiserver(self) -> float:
        """The API server restarted as a cluster does it: out of the `kubernetes` Service while it
        is away and until it is ready again (its endpoint reconciler removes and re-adds it, and
        kube-proxy follows), so that the node's Pods reach it only once it serves them; until then
        their connections are refused. The seconds it was away."""
        (service,) = [r for r in self._rules if r[0] == "PREROUTING" and SERVICE_IP in r]
        # to a port nothing listens on: refused at once, as kube-proxy REJECTs a Service with no endpoint
        refused = [*service[:-1], f"127.0.0.1:{realserver.free_port()}"]
        nat = lambda op, rule: subprocess.run(["iptables", "-t", "nat", op, *rule], check=True,  # noqa: E731
                                              capture_output=True, timeout=30)
        self._rules.append(refused)         # stop() removes it should this fail half-way
        nat("-I", refused)
        nat("-D", service)
        try:
            return self.api.restart_apiserver()
        finally:
            nat("-I", service)
            nat("-D", refused)
            self._rules.remove(refused)

    def restart_kubelet(self, away: Any = None, **settings: Any) -> None:
        """The kubelet killed and started again (its Pods' containers go on), with `settings` over its
        KubeletConfiguration from now on (none: the node's own again); `away()` runs while it is down."""
        self.kubelet_settings = settings
        self._kill("kubelet", signal.SIGKILL)
        try:
            if away is not None:
                away()
        finally:
            self._start_kubelet()
        self.wait_ready(time.monotonic() + 90)

    @property
    def gateway(self) -> str:
        """The node's address as its Pods see the host (its bridge's gateway)."""
        return f"{self.subnet}.1"

    def expose(self, port: int) -> str:
        """A server of the tests' on 127.0.0.1:port made reachable from the node's Pods at
        gateway:port (a registry, say): a DNAT rule on the bridge, and one in OUTPUT so that the
        host's own clients (the run in-process, policycheck) reach it by the same name, as the
        kubelet's port is reached; removed by stop(). Returns the address Pods use."""
        to = ["-d", self.gateway, "-p", "tcp", "--dport", str(port), "-j", "DNAT", "--to-destination",
              f"127.0.0.1:{port}"]
        for rule in (self.rule("PREROUTING", "-i", self.bridge, *to), self.rule("OUTPUT", *to)):
            self._rules.append(rule)
            subprocess.run(["iptables", "-t", "nat", "-A", *rule], check=True, capture_output=True, timeout=30)
        return f"{self.gateway}:{port}"

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            for name in self.procs:
                self._alive(name)
            node = self.api.get("Node", "", self.name) if self.api else None
            conditions = ((node or {}).get("status") or {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.5)
        raise RuntimeError(f"node {self.name} not Ready: {self.tail('kubelet')}")

    def _alive(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}: {self.tail(name)}")

    def tail(self, name: str, lines: int = 12) -> str:
        path = self.root / f"{name}.log"
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def kill_container(self, pod: dict[str, Any]) -> None:
        """SIGKILL to every process of the Pod's (first) container, as the OOM killer or a crash
        would end it: found by its container ID in our cgroup root."""
        cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
        (procs,) = Path("/sys/fs/cgroup/pids").glob(f"{self.name}/**/{cid}/cgroup.procs")
        for pid in procs.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

    # images -----------------------------------------------------------------------------------
    def ctr(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ctr", "--address", str(self.root / "containerd/containerd.sock"),
                               "--namespace", "k8s.io", *args], capture_output=True, text=True,
                              check=check, timeout=timeout)

    def import_image(self, archive: Path) -> None:
        """An image archive (docker or OCI) into the node's containerd, as the kubelet will find it
        (no pull: the Pods name it with imagePullPolicy IfNotPresent or a tag other than latest)."""
        self.ctr("images", "import", "--no-unpack", str(archive))

    # teardown ---------------------------------------------------------------------------------
    def _kill(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        """Every step tried, even when one before it failed (the first failure is raised after)."""
        failures: list[Exception] = []

        def step(do: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return do(*args, **kwargs)
            except Exception as err:        # noqa: BLE001 - the rest must still be undone
                failures.append(err)
                return None
        for name in ("kubelet", "kube-scheduler", "kube-controller-manager"):
            step(self._kill, name)
        netns = step(nodeteardown.pod_netns, self) or []
        step(nodeteardown.kill_containers, self)
        step(self._kill, "containerd")
        for ns in netns:
            step(subprocess.run, ["ip", "netns", "delete", ns], capture_output=True, timeout=30)
        step(nodeteardown.unmount, self)
        step(nodeteardown.remove_cgroups, self)
        step(self._remove_rules)
        step(subprocess.run, ["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
        if self.api is not None:
            step(self.api.stop)
        if self._lock is not None:
            self._lock.close()              # the index free for another session
            self._lock = None
        if failures:
            raise failures[0]

    def _remove_rules(self) -> None:
        """Our rules, and any a killed session of this index left: all carry our comment."""
        listed = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True, timeout=30).stdout
        for line in listed.splitlines():
            if line.startswith("-A ") and f"--comment {self.name} " in f"{line} ":
                subprocess.run(["iptables", "-t", "nat", "-D", *shlex.split(line)[1:]], capture_output=True,
                               timeout=30)
        self._rules = []
