"""The cluster around a run on the real kube-apiserver while it waits (`run --wait`, issue 40), in a
thread: a kubelet that ends each build Pod of ours `build_seconds` after it appears (Succeeded), the
MCO's render and node controllers (the real ones' process when given, `real_mco`, else the
imitations of tests/support/mcorender.py and mconode.py with upstream's render delay: the render
controller renders 5 s after a MachineConfig changed, `renderDelay`; pools synced every 0.2 s), the
daemon played (a node moves to its desiredConfig at once), and a `Clock` of when each build ended and
each node's desiredConfig changed. Used by tests/realapi/test_realapi_follow.py and bench/one_run.py."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kubelet  # examples/kubelet.py

from reconcile import cli
from tests.support import factory as F
from tests.support import mconode, mcorender
from tests.unit.test_rollout import mco_pool, source_mc

REPO = F.REPO
NEW_BASE = "quay.io/ocp/base@sha256:" + "b" * 64
#: kustomize/base/cronjob.yaml's --wait
WAIT = "540"

MCO = mcorender.MCO


class Clock:
    """What happened when: build ends, nodes' desiredConfig changes (monotonic seconds)."""

    def __init__(self) -> None:
        self.ended: dict[str, float] = {}
        self.desired: list[tuple[float, str, str]] = []     # (when, node, config)


def ann(o):
    return o["metadata"].get("annotations") or {}


class World(threading.Thread):
    """The kubelet, the MCO's controllers when played, the daemon, and the watcher of desiredConfig."""

    def __init__(self, api, clock: Clock, build_seconds: float, real_mco, render_delay: float):
        super().__init__(daemon=True)
        self.api, self.clock, self.build_seconds, self.real = api, clock, build_seconds, real_mco
        self.render_delay = render_delay
        self.stop = threading.Event()
        self.base = F.BASE
        self.seen: dict[str, float] = {}
        self.sources = ""
        self.sources_changed = 0.0
        self.rendered_sources = ""
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            with self.lock:
                try:
                    self.step()
                except Exception as err:  # noqa: BLE001 - a conflict with a run: the next step goes on
                    print(f"world: {type(err).__name__}: {err}", file=sys.stderr)

    def step(self) -> None:
        api, now = self.api, time.monotonic()
        for pod in api.list("Pod", F.NS):
            name = pod["metadata"]["name"]
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            first = self.seen.setdefault(name, now)
            if now - first >= self.build_seconds:
                api.write_status(kubelet.set_phase(pod, "Succeeded"))
                self.clock.ended[name] = time.monotonic()
        if self.real is None:                   # the imitations, with upstream's render delay
            mcs = api.list("MachineConfig")
            sources = json.dumps(sorted((m["metadata"]["name"], m["metadata"].get("generation"))
                                        for m in mcs if not m["metadata"]["name"].startswith("rendered-")))
            if sources != self.sources:
                self.sources, self.sources_changed = sources, now
            if sources != self.rendered_sources and now - self.sources_changed >= self.render_delay:
                for pool in api.list("MachineConfigPool"):
                    try:
                        mcorender.sync_api(api, pool["metadata"]["name"], self.base)
                    except mcorender.RenderError:
                        pass
                self.rendered_sources = sources
            for pool in api.list("MachineConfigPool"):
                mconode.sync_api(api, pool["metadata"]["name"])
            self.note_desired()
            mconode.daemon_api(api)
        else:
            self.note_desired()
            self.real.daemon.boot()
            self.real.daemon.step()

    def note_desired(self) -> None:
        for node in self.api.list("Node"):
            desired = ann(node).get(f"{MCO}/desiredConfig", "")
            known = [d for _, n, d in self.clock.desired if n == node["metadata"]["name"]]
            if desired and (not known or known[-1] != desired):
                self.clock.desired.append((time.monotonic(), node["metadata"]["name"], desired))


#: upstream's render delay (openshift/machine-config-operator pkg/controller/render/render_controller.go
#: `renderDelay`, 5 s): how long the played render controller waits after a MachineConfig changed
RENDER_DELAY = 5.0


def mcorender_delay() -> float:
    return RENDER_DELAY


def fingerprint(api) -> str:
    objs = [*api.list("MachineConfigPool"), *api.list("Node"), *api.list("MachineConfig"), *api.list("Pod", F.NS)]
    return json.dumps(sorted((o["kind"], o["metadata"]["name"], o["metadata"].get("resourceVersion"))
                              for o in objs))


def quiet(api, world: World, seconds: float, timeout: float = 180) -> None:
    """Until nothing changed for `seconds` (the MCO's render delay included) and, with the real
    controllers, their work queues are idle (mcoreal `Controllers.idle`)."""
    idle = world.real.controllers.idle if world.real is not None else (lambda: True)
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        now = fingerprint(api)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds and idle():
            return
        time.sleep(0.25)
    raise RuntimeError("the cluster kept changing")


class Scenario:
    """One measured change on a server: `setup` (a held, rolled-out worker pool, and infra that inherits
    its image when asked), `change`, then `measure`'s runs until the first node's new desiredConfig."""

    def __init__(self, api: Any, root: Path, build_seconds: float, real_mco: Any = None,
                 render_delay: float = RENDER_DELAY):
        """`render_delay`: the played render controller's (upstream's 5 s by default, as bench/one_run.py
        measures; make test plays the 0.5 s the real controllers' harness is built with)."""
        self.api, self.root, self.real = api, root, real_mco
        self.kubeconfig = api.kubeconfig(root / "sa.kubeconfig", api.sa_token, "ocl-reconciler")
        self.clock = Clock()
        self.world = World(api, self.clock, build_seconds, real_mco, render_delay)
        # between runs, nothing may change for longer than what the world waits on (the render delay,
        # the build's time) and a margin; with the real controllers their work queues are idle too
        # (quiet: a render that comes late, after a conflict's backoff, is a delayed add they report)
        self.settle_seconds = max(render_delay, build_seconds) + 1.5

    def run(self, *extra: str) -> tuple[int, str, int]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["run", "--kubeconfig", self.kubeconfig, "--timeout", "30", "--keep-images", "-1", *extra])
        text = err.getvalue()
        found = re.findall(r"; (\d+) requests", text)
        return code, text, int(found[-1]) if found else -1

    def setup(self, infra: bool) -> None:
        with self.world.lock:
            self.api.reset()
            self.world.base, self.world.seen = F.BASE, {}
            self.world.sources = self.world.rendered_sources = ""
            pools = [mco_pool("worker", ("worker",))]
            nodes = [F.node("worker-0", "worker"), F.node("worker-1", "worker")]
            if infra:
                pools.append(mco_pool("infra", ("worker", "infra"), opted_in=False))
                nodes.append(F.node("infra-0", "infra"))
            for p in pools:
                p["spec"]["maxUnavailable"] = 1
                p["status"] = {}
            items = [F.build_config(imageBuilderType="custom-pod-builder", rollout="machineconfig",
                                    finalImagePullspec=f"{REPO}:latest", rolloutGate="hold"),
                     F.osimageurl(), F.secret("pull-secret"),
                     F.secret("push-secret", payload={"auths": {REPO.split("/")[0]: {"auth": "dTpw"}}}),
                     *pools, *nodes, source_mc("00-worker", "worker", {"/etc/base": "base"}, generated=True)]
            if self.real is not None:
                from tests.support import mcoreal
                items = [mcoreal.as_created(o) for o in items]
                self.real.daemon.installed.streams(F.BASE)
            else:
                for o in items:
                    if o["kind"] == "MachineConfigPool":
                        o["spec"]["configuration"] = {"name": ""}
            self.api.load(items)
            if self.real is None:
                for p in pools:
                    mcorender.sync_api(self.api, p["metadata"]["name"], F.BASE)
                mconode.first_boot_api(self.api)
            self.api.write_rollout_params(REPO, ["worker"])
        quiet(self.api, self.world, self.settle_seconds)
        for _ in range(8):                              # opted in, built, rolled out, held again
            code, err, _ = self.run()
            assert code == 0, err
            quiet(self.api, self.world, self.settle_seconds)
            if "0 created, 0 patched, 0 deleted" in err.splitlines()[-1] and not self.pending():
                return
        raise RuntimeError("the setup did not converge: " + err.splitlines()[-1])

    def pending(self) -> bool:
        return any((p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") for p in self.api.list("Pod", F.NS))

    def change(self, kind: str) -> None:
        with self.world.lock:
            if kind == "upgrade":
                cm = self.api.get("ConfigMap", F.MCO_NS, "machine-config-osimageurl")
                cm["data"].update(baseOSContainerImage=NEW_BASE, releaseVersion="4.16.1")
                self.api.request("PUT", self.api.path("ConfigMap", F.MCO_NS, "machine-config-osimageurl"), cm)
                self.world.base = NEW_BASE
                if self.real is not None:
                    self.real.daemon.installed.streams(NEW_BASE)
                mc = self.api.get("MachineConfig", "", "00-worker")
                mc["spec"]["config"]["storage"]["files"].append({"path": "/etc/release", "mode": 420,
                                                                 "contents": {"source": "data:,4.16.1"}})
                self.api.request("PUT", self.api.path("MachineConfig", "", "00-worker"), mc)
            else:
                self.api.create(source_mc("99-worker-motd", "worker", {"/etc/motd": "hello"}))
        quiet(self.api, self.world, self.settle_seconds)        # the MCO renders it (the pools held)

    def ours(self) -> str:
        mc = self.api.get("MachineConfig", "", "ocl-osimageurl-worker")
        return (mc or {}).get("spec", {}).get("osImageURL", "")

    def moved(self, node_prefix: str, before: str, since: float) -> float | None:
        """When the first node of the pool got a desiredConfig carrying an image other than `before`."""
        for when, node, config in self.clock.desired:
            if when < since or not node.startswith(node_prefix):
                continue
            mc = self.api.get("MachineConfig", "", config) or {}
            if mc.get("spec", {}).get("osImageURL") not in ("", None, before):
                return when
        return None

    def measure(self, kind: str, wait: bool) -> dict:
        self.setup(infra=kind == "custom")
        before = self.ours()
        self.change(kind)
        since = time.monotonic()
        prefix = "infra-" if kind == "custom" else "worker-"
        runs = 0
        for _ in range(6):
            runs += 1
            code, err, _ = self.run(*(("--wait", WAIT) if wait else ()))
            assert code == 0, err
            if wait:
                deadline = time.monotonic() + 30             # the MCO acts on the released pool
                while time.monotonic() < deadline and self.moved(prefix, before, since) is None:
                    time.sleep(0.2)
            else:
                quiet(self.api, self.world, self.settle_seconds)
            if self.moved(prefix, before, since) is not None:
                break
        at = self.moved(prefix, before, since)
        ends = [t for name, t in self.clock.ended.items() if t >= since and "worker" in name]
        return {"runs": runs, "seconds": round(at - min(ends), 1) if at is not None and ends else None}

    def steady_requests(self) -> tuple[int, int]:
        self.setup(infra=False)
        _, _, plain = self.run()
        _, _, waiting = self.run("--wait", WAIT)
        return plain, waiting
