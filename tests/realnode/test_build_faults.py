"""Faults of the build Pod under the real kubelet (issue 53 item 3), the product's own Pod as
test_build_pod.py runs it (tests/support/nodebuild.py), with nothing lost in each:

- the kubelet restarted mid-build, the build ending while it is away;
- the build Pod deleted, or evicted through the API as a drain does, mid-build: the same
  `run --wait` makes another attempt, and the next build reuses the kept storage;
- a build Pod that cannot be scheduled (no node of the pool's architecture; storage that cannot
  bind): the scheduler's reason in `status`, `explain` and the pool's annotations;
- a registry that refuses the push: the pool fails with the registry's reason.

The Pods reach the registry through a front (signing.Refusing) that holds the base's first blob
pull (NB.Hold), so that each fault lands while the build runs, or refuses the push. Expected
values come from outside the product: the scheduler's own PodScheduled condition, distribution's
DENIED message (docs/spec/api.md, "Errors"), the registry's digest and access log, containerd's
tasks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support import nodebuild as NB
from tests.support import realbuild as R
from tests.support import waiting
from tests.support.signing import DENIED

pytestmark = pytest.mark.realnode

#: distribution's DENIED (tests/support/signing.DENIED) as the builder's buildah says it: its
#: errcode client turns an error without detail whose message is its code's own into the bare code,
#: lower case (distribution registry/api/errcode: Errors.UnmarshalJSON, ErrorCode.Error)
REFUSED = DENIED["errors"][0]["code"].lower()


class Front:
    """What the registry's front does to the Pods' requests: holds one (`hold`) or refuses a push."""

    def __init__(self) -> None:
        self.hold = NB.Hold()
        self.refuse_push = False

    def __call__(self, method: str, path: str) -> bool:
        if self.refuse_push and method in ("POST", "PUT", "PATCH") and path.startswith("/v2/ocl/os-image/"):
            return True
        return self.hold(method, path)


def base_blob(method: str, path: str) -> bool:
    return method == "GET" and path.startswith("/v2/ocl/base/blobs/")


@pytest.fixture(scope="module")
def front() -> Front:
    return Front()


@pytest.fixture(scope="module")
def w(node, deployed, front, tmp_path_factory):
    R.ensure_tools()
    world = NB.world(node, tmp_path_factory.mktemp("buildfaults"), front)
    try:
        yield world
    finally:
        world.stop()


@pytest.fixture
def f(front):
    front.hold.arm(lambda method, path: False)
    front.refuse_push = False
    yield front
    front.hold.released.set()


def running_build(d) -> dict[str, Any]:
    """The build Pod once the kubelet reports its container running."""
    def running() -> dict[str, Any] | None:
        for pod in NB.build_pods(d.api):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if "running" in (status.get("state") or {}):
                    return pod
        return None
    return d.wait_for("the build Pod running", running, 60)


def during(fault: Callable[[], Any], front: Front, d, kubeconfig: str) -> tuple[int, str, Any]:
    """`run --wait` here, and `fault()` in a thread once the build is held at its base's pull; the
    hold released when the fault returns (or fails). (exit code, stderr, what fault returned)."""
    done: dict[str, Any] = {}

    def act() -> None:
        try:
            if not front.hold.held.wait(120):
                raise AssertionError("the build never pulled its base")
            done["value"] = fault()
        except BaseException as err:           # noqa: BLE001 - re-raised below, in the test
            done["error"] = err
        finally:
            front.hold.released.set()
    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    code, err = NB.run(d.node, kubeconfig)
    thread.join(180)
    if "error" in done:
        raise done["error"]
    return code, err, done.get("value")


def exited(d, pod: dict[str, Any], seconds: float = 120) -> None:
    """Until containerd no longer runs the Pod's container (its task ended)."""
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tasks = d.node.ctr("tasks", "ls").stdout.splitlines()
        if not any(line.split()[:1] == [cid] and "RUNNING" in line for line in tasks):
            return
        time.sleep(0.5)
    raise AssertionError(f"container {cid} still runs")


def succeeded(d, w, code: int, err: str, mc: dict[str, Any]) -> dict[str, str]:
    a = d.ann()
    assert (code, a.get(A.STATE)) == (0, A.SUCCEEDED), (a.get(A.MESSAGE), err[-3000:])
    assert w.inspect(f"ocl/os-image:{mc['metadata']['name']}")["Digest"] == NB.digest_of(a)
    return a


def test_the_kubelet_restarted_mid_build_and_the_build_ends_while_it_is_away(d, w, f, kubeconfig, tmp_path):
    NB.provide_storage(d.node, tmp_path / "pv", "ocl-faults-kubelet")
    mc = NB.machineconfig("rendered-worker-1", w.pods_registry)
    d.seed(NB.scenario(w, mc))
    f.hold.arm(base_blob)

    def restart() -> dict[str, Any]:
        pod = running_build(d)

        def away() -> None:                    # the build goes on, and ends, with no kubelet
            f.hold.released.set()
            exited(d, pod)
        d.node.restart_kubelet(away=away)
        return pod

    code, err, pod = during(restart, f, d, kubeconfig)
    a = succeeded(d, w, code, err, mc)
    # the build the run started, told by the kubelet that came back: no other attempt
    assert a[A.BUILD] == f"Pod/{F.NS}/{pod['metadata']['name']}" and a.get(A.ATTEMPT) == "1", a


#: the removal's grace period: build-pod.sh runs as the container's PID 1, a bash with no SIGTERM
#: handler, which the kernel does not kill on SIGTERM: the default 30 s would pass before SIGKILL
GRACE = 2


def evict(d, pod: dict[str, Any]) -> None:
    """The Eviction API, as `kubectl drain` evicts a Pod (policy/v1 Eviction, pods/eviction)."""
    name = pod["metadata"]["name"]
    d.api.request("POST", f"/api/v1/namespaces/{F.NS}/pods/{name}/eviction",
                  {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": F.NS},
                   "deleteOptions": {"gracePeriodSeconds": GRACE}})


def delete(d, pod: dict[str, Any]) -> None:
    """`kubectl delete pod --grace-period GRACE`."""
    d.api.request("DELETE", f"/api/v1/namespaces/{F.NS}/pods/{pod['metadata']['name']}",
                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": GRACE})


def gone(d, pod: dict[str, Any]) -> None:
    """Until the Pod object is gone (the kubelet killed its container), its base pull still held:
    the build cannot have ended. A Pod of the same name and another uid is the next attempt."""
    def away() -> bool:
        now = d.api.get("Pod", F.NS, pod["metadata"]["name"])
        return now is None or now["metadata"]["uid"] != pod["metadata"]["uid"]
    waiting.until("the removed build Pod gone", away, 60)


@pytest.mark.parametrize("remove", [delete, evict], ids=["deleted", "evicted"])
def test_the_build_pod_removed_mid_build_is_built_again_in_the_same_run_on_the_kept_storage(
        d, w, f, kubeconfig, tmp_path, remove):
    volume = tmp_path / "pv"
    NB.provide_storage(d.node, volume, f"ocl-faults-{remove.__name__}")
    mc = NB.machineconfig("rendered-worker-1", w.pods_registry)
    d.seed(NB.scenario(w, mc))
    f.hold.arm(base_blob)

    def removed() -> dict[str, Any]:
        pod = running_build(d)
        remove(d, pod)
        gone(d, pod)
        return pod

    code, err, pod = during(removed, f, d, kubeconfig)
    a = succeeded(d, w, code, err, mc)
    # the same run made a second attempt (desired.build_name: retries are numbered)
    assert a[A.BUILD] != f"Pod/{F.NS}/{pod['metadata']['name']}" and a.get(A.ATTEMPT) == "2", a
    claim = a[A.BUILD_STORAGE].removeprefix("PersistentVolumeClaim/")
    assert d.api.get("PersistentVolumeClaim", F.NS, claim)["spec"]["volumeName"] == f"ocl-faults-{remove.__name__}"

    # one file changed: the next build takes the base from the kept volume, not from the registry
    second = NB.machineconfig("rendered-worker-2", w.pods_registry)
    NB.switch_config(d.node, second)
    mark = len(w.registry.requests())
    code, err = NB.run(d.node, kubeconfig)
    a = succeeded(d, w, code, err, second)
    assert w.base_blob_gets(mark) == 0, a[A.MESSAGE]


def test_a_registry_that_refuses_the_push_fails_the_pool_with_its_reason(d, w, f, kubeconfig, tmp_path):
    NB.provide_storage(d.node, tmp_path / "pv", "ocl-faults-refused")
    d.seed(NB.scenario(w, NB.machineconfig("rendered-worker-1", w.pods_registry)))
    f.refuse_push = True
    code, err = NB.run(d.node, kubeconfig)
    a = d.ann()
    assert w.front.refused, "the push never reached the registry"
    assert (code, a.get(A.STATE)) == (0, A.FAILED), (a.get(A.MESSAGE), err[-3000:])
    log = d.kubectl("logs", "-n", F.NS, a[A.BUILD].split("/")[-1], check=False).stdout
    said = f"initiating layer upload to /v2/ocl/os-image/blobs/uploads/ in {w.pods_registry}: {REFUSED}"
    assert a[A.MESSAGE].endswith(said), (a[A.MESSAGE], log[-3000:])
    assert a.get(A.ATTEMPT) == "1", a                              # refused is not transient


# a build Pod that cannot be scheduled ---------------------------------------------------------

def unscheduled(d, pool: str, seconds: float = 60) -> str:
    """The scheduler's message on the pool's build Pod (PodScheduled False, Unschedulable)."""
    def condition() -> str | None:
        return next(filter(None, map(NB.unschedulable, NB.build_pods(d.api))), None)
    return d.wait_for("the scheduler's Unschedulable", condition, seconds)


def shown(d, kubeconfig: str, pool: str, said: str) -> None:
    """The scheduler's message (its first sentence, as the product keeps its text) in `status -o
    wide` (the default table cuts MESSAGE to 120 columns), `explain` and the pool's annotations."""
    words = said.split(". ")[0]
    code, status, err = NB.command("status", "-o", "wide", "--kubeconfig", kubeconfig)
    assert words in status, (status, err)
    code, explained, err = NB.command("explain", pool, "--kubeconfig", kubeconfig)
    assert words in explained, (explained, err)
    a = d.ann(pool)
    assert a.get(A.STATE) == A.PENDING and words in a.get(A.MESSAGE, ""), a


def test_no_node_of_the_pools_architecture_shows_the_schedulers_reason(d, w, f, kubeconfig):
    mc = NB.machineconfig("rendered-arm-1", w.pods_registry)
    settings = NB.settings(w, buildStorage="emptyDir")           # its reason alone: no volume to bind
    d.api.load([*settings, F.pool("arm", rendered=mc["metadata"]["name"]), mc, NB.arm64_node("ocl-arm-0", "arm")])
    try:
        code, err = NB.run(d.node, kubeconfig, wait=10)
        said = unscheduled(d, "arm")
        assert "didn't match Pod's node affinity/selector" in said, said
        shown(d, kubeconfig, "arm", said)
    finally:
        d.api.request("DELETE", d.api.path("Node", "", "ocl-arm-0"), ok=(404,))


def test_storage_that_cannot_bind_shows_the_schedulers_reason(d, w, f, kubeconfig):
    nothing = dict(NB.storage_class(), metadata={"name": "ocl-no-volume"})
    d.api.load([nothing])
    d.seed(NB.scenario(w, NB.machineconfig("rendered-worker-1", w.pods_registry), buildStorageClass="ocl-no-volume"))
    code, err = NB.run(d.node, kubeconfig, wait=10)
    said = unscheduled(d, "worker")
    assert "unbound immediate PersistentVolumeClaims" in said, said
    shown(d, kubeconfig, "worker", said)
