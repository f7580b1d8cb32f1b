"""Argo CD's own code judges our health checks: the `argocd` CLI of the release pinned in
tests/tools/argocd/go.mod (built once from the Go module proxy by its build.sh, `make argocd`) runs
`argocd admin settings resource-overrides health OBJ --argocd-cm-path CM`, the command Argo CD
documents for testing a check, through the same Lua VM (gopher-lua, no `string`/`math` libraries
for custom checks) and gitops-engine code the application controller uses.

CM is the argocd-cm that `kubectl kustomize` renders for an Argo CD install (that release's own
manifests/install.yaml under `namespace: argocd`) taking our Component as a `components:` entry:
the keys tested are the keys an instance gets (docs/argocd.md). Cases: every check's
`health_test.yaml` (Argo CD's test layout), the pools and Builds of the demo's lifecycle for both
builders, and Argo CD 3.2's CronJob check (../shared/argocd) on our CronJob in the states our
exits leave it in."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubelet  # examples/kubelet.py
import mco  # examples/mco.py
import pytest
import yaml

from reconcile.cluster import snapshot
from tests.support import factory as F
from tests.support import realserver
from tests.support.argocdreal import cache_dir, missing

COMPONENT = F.ROOT / "kustomize/overlays/argocd/argocd-cm"
OURS = sorted(COMPONENT.glob("*/*/health_test.yaml"))
CRONJOB = F.SHARED / "argocd/batch/CronJob"
STATE, MESSAGE = "ocl-reconciler.io/state", "ocl-reconciler.io/message"
ROLLOUT, OVERRIDDEN_BY = "ocl-reconciler.io/rollout", "ocl-reconciler.io/rollout-overridden-by"
IMAGE = "machineconfiguration.openshift.io/newestImageEquivalentConfig"
HEALTH_KEY = "resource.customizations.health."


def config_key(group: str, kind: str) -> str:
    """The argocd-cm key of a kind's health check (util/lua GetConfigMapKey: group_kind)."""
    return f"{HEALTH_KEY}{group}_{kind}"


class Argocd:
    """The real CLI, assessing objects against argocd-cm files written into a work folder."""

    def __init__(self, binary: Path, work: Path):
        self.binary, self.work, self.count = binary, work, itertools.count()

    def write(self, doc: dict[str, Any]) -> Path:
        path = self.work / f"doc-{next(self.count)}.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        return path

    def run(self, obj: dict[str, Any], cm: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.binary), "admin", "settings", "resource-overrides", "health",
                               str(self.write(obj)), "--argocd-cm-path", str(cm)],
                              capture_output=True, text=True, encoding="utf-8", timeout=60)

    def health(self, obj: dict[str, Any], cm: Path) -> dict[str, str]:
        """{status, message} as the CLI prints them (`STATUS: ...` then `MESSAGE: ...`, which may
        span lines), else {error: what it said}, so that one case's failure shows as that case's."""
        out = self.run(obj, cm)
        status, sep, message = out.stdout.partition("\nMESSAGE: ")
        if out.returncode or not (status.startswith("STATUS: ") and sep and message.endswith("\n")):
            return {"error": f"exit {out.returncode}: {out.stdout}{out.stderr.strip().splitlines()[-1:]}"}
        return {"status": status.removeprefix("STATUS: "), "message": message[:-1]}

    def health_of_all(self, objs: list[dict[str, Any]], cm: Path) -> list[dict[str, str]]:
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(lambda o: self.health(o, cm), objs))

    def cm(self, data: dict[str, str]) -> Path:
        return self.write({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "argocd-cm", "namespace": "argocd"}, "data": data})


@pytest.fixture(scope="session")
def argocd(tmp_path_factory) -> Argocd:
    folder = cache_dir()
    if not (folder / "argocd").is_file() or not (folder / "install.yaml").is_file():
        missing(f"the Argo CD tests need argocd and install.yaml in {folder}: `make argocd` builds them "
                f"from Go modules (needs go and the module proxy)")
    return Argocd(folder / "argocd", tmp_path_factory.mktemp("argocd"))


@pytest.fixture(scope="session")
def kustomize(argocd):
    kubectl = shutil.which("kubectl") or str(realserver.cache_dir() / "kubectl")
    if not Path(kubectl).is_file():
        missing("kubectl is neither on the PATH nor in the realapi cache (`make realapi`)")

    def build(path: Path) -> list[dict[str, Any]]:
        out = realserver.kustomize(path, kubectl)
        return [d for d in yaml.load_all(out, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
    return build


@pytest.fixture(scope="session")
def installed_cm(argocd, kustomize) -> tuple[Path, dict[str, Any]]:
    """The argocd-cm of an Argo CD install that takes our Component, as docs/argocd.md says: the
    release's install.yaml, `namespace: argocd`, `components:` our folder. Returns its file and it."""
    install = argocd.work / "install"
    install.mkdir()
    shutil.copy(cache_dir() / "install.yaml", install / "install.yaml")
    (install / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "argocd",
        "resources": ["install.yaml"], "components": [os.path.relpath(COMPONENT, install)]}))
    docs = kustomize(install)
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "argocd-cm"]
    return argocd.write(cm), cm


def cases(test_file: Path) -> list[tuple[Path, dict[str, str]]]:
    return [(test_file.parent / c["inputPath"], c["healthStatus"])
            for c in yaml.safe_load(test_file.read_text(encoding="utf-8"))["tests"]]


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --- the Component as an Argo CD install takes it --------------------------------------------------

def test_component_merges_our_checks_into_the_installs_argocd_cm(installed_cm):
    _, cm = installed_cm
    assert cm["metadata"]["namespace"] == "argocd"
    assert cm["metadata"]["labels"]["app.kubernetes.io/name"] == "argocd-cm"    # upstream's object, merged
    checks = {config_key(*f.parent.relative_to(COMPONENT).parts): (f.parent / "health.lua").read_text()
              for f in OURS}
    assert len(checks) == 2
    assert {k: v for k, v in cm["data"].items() if k.startswith("resource.customizations")} == checks


# --- every check's health_test.yaml, through the binary --------------------------------------------

@pytest.mark.parametrize("input_path, expected", [c for f in OURS for c in cases(f)],
                         ids=lambda v: "/".join(v.parts[-4:]) if isinstance(v, Path) else "")
def test_our_health_checks(our_results, input_path, expected):
    assert our_results[input_path] == expected


@pytest.fixture(scope="session")
def our_results(argocd, installed_cm) -> dict[Path, dict[str, str]]:
    """Every case's outcome, assessed two at a time (each run of the CLI takes about 0.3 s)."""
    paths = [p for f in OURS for p, _ in cases(f)]
    return dict(zip(paths, argocd.health_of_all([load(p) for p in paths], installed_cm[0]), strict=True))


def test_every_pool_state_and_build_phase_is_covered():
    def values(kind: str, get) -> set:
        return {get(load(p)) for p in (COMPONENT / kind / "testdata").iterdir()}
    states = values("machineconfiguration.openshift.io/MachineConfigPool",
                    lambda o: o["metadata"].get("annotations", {}).get(STATE))
    assert states >= {"Pending", "Building", "Succeeded", "Failed", "Interrupted", "Blocked", None}
    phases = values("build.openshift.io/Build", lambda o: (o.get("status") or {}).get("phase"))
    assert phases >= {None, "Pending", "Running", "Complete", "Failed", "Error", "Cancelled"}
    messages = [m for f in OURS for _, e in cases(f) for m in [e["message"]]]
    assert any("'4." in m for m in messages) and any("(2" in m for m in messages)   # escaped before a digit
    assert any("\n2" in m for m in messages) and any(not m.isascii() for m in messages)


@pytest.mark.parametrize("library, call", [("string", 'string.format("%d tries", 2)'),
                                           ("math", 'tostring(math.floor(2.5)) .. " tries"')])
def test_custom_checks_run_without_string_and_math_unless_use_open_libs(argocd, installed_cm, library, call):
    """Argo CD opens only base, table, package and a safe os for a custom check (util/lua/lua.go):
    a script using `string` or `math` errors unless `resource.customizations.useOpenLibs.<key>` is
    "true". Our argocd-cm sets no such key, so the checks above passed without those libraries."""
    probe = {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": {"name": "p"}}
    script = {config_key("example.com", "Probe"): f'return {{status = "Healthy", message = {call}}}'}
    closed = argocd.run(probe, argocd.cm(script))
    assert closed.returncode != 0 and "non-table object(nil)" in closed.stderr, closed.stderr
    opened = argocd.cm({**script, "resource.customizations.useOpenLibs.example.com_Probe": "true"})
    assert argocd.health(probe, opened) == {"status": "Healthy", "message": "2 tries"}
    assert not [k for k in installed_cm[1]["data"] if "useOpenLibs" in k]


# --- the demo's lifecycle ---------------------------------------------------------------------------

#: docs/argocd.md: a pool's health from our state annotation (none recorded: Healthy)
POOL_HEALTH = {None: "Healthy", "Pending": "Progressing", "Building": "Progressing", "Succeeded": "Healthy",
               "Failed": "Degraded", "Blocked": "Degraded", "Interrupted": "Degraded"}
#: openshift/api build/v1 BuildPhase: New, Pending, Running, Complete, Failed, Error, Cancelled
BUILD_HEALTH = {None: "Progressing", "New": "Progressing", "Pending": "Progressing", "Running": "Progressing",
                "Complete": "Healthy", "Failed": "Degraded", "Error": "Degraded", "Cancelled": "Degraded"}


def expected_health(obj: dict[str, Any]) -> dict[str, str]:
    if obj["kind"] == "Build":
        status = obj.get("status") or {}
        phase, message = status.get("phase"), status.get("message")
        if phase in ("Failed", "Error", "Cancelled"):
            return {"status": "Degraded", "message": f"Build {phase}" + (f": {message}" if message else "")}
        return {"status": BUILD_HEALTH[phase], "message": "Build completed" if phase == "Complete"
                else f"Build is {phase or 'New'}"}
    annotations = obj["metadata"].get("annotations") or {}
    state, message = annotations.get(STATE), annotations.get(MESSAGE)
    if state is None:
        return {"status": "Healthy", "message": "No layered OS image build recorded"}
    if state == "Succeeded" and ROLLOUT in annotations:
        return expected_rollout(obj, annotations)
    return {"status": POOL_HEALTH[state],
            "message": f"{state}: {message}" if message else f"Layered OS image build {state}"}


def expected_rollout(pool: dict[str, Any], annotations: dict[str, str]) -> dict[str, str]:
    """docs/argocd.md: a Succeeded pool whose rendered config a run checked (rollout: machineconfig)
    is Degraded when the render failed or another MachineConfig overrides our image, Progressing
    until its rendered config holds our image and every node runs it."""
    spec, status = pool.get("spec") or {}, pool.get("status") or {}
    target = (spec.get("configuration") or {}).get("name")
    failed = [c.get("message") for c in status.get("conditions") or []
              if c.get("type") == "RenderDegraded" and c.get("status") == "True"]
    if failed:
        return {"status": "Degraded", "message": f"Succeeded: render failed: {failed[-1]}"}
    if annotations.get(OVERRIDDEN_BY):
        return {"status": "Degraded", "message": (
            f"Succeeded: overridden by MachineConfig {annotations[OVERRIDDEN_BY]}, which sets osImageURL and merges "
            f"after ocl-osimageurl-{pool['metadata']['name']}: rename it to sort before, or remove its osImageURL")}
    if annotations[ROLLOUT] != f"{target}={annotations.get(IMAGE)}":
        return {"status": "Progressing",
                "message": f"Succeeded: the MCO has not rendered the image into pool {pool['metadata']['name']} yet"}
    total, updated = status.get("machineCount", 0), status.get("updatedMachineCount", 0)
    if (status.get("configuration") or {}).get("name") == target and updated >= total:
        return {"status": "Healthy", "message": f"Succeeded: rolled out to {total} node(s)"}
    degraded = status.get("degradedMachineCount", 0)
    return {"status": "Progressing", "message": f"Succeeded: rolling out {updated}/{total} nodes"
            + (f", {degraded} degraded" if degraded else "")}


def build_config(items: list[dict[str, Any]]) -> dict[str, str]:
    (cm,) = [o for o in items if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "on-cluster-build-config"]
    return cm["data"]


def demo_lifecycle(run_cli, builder: str) -> list[list[dict[str, Any]]]:
    """Every snapshot of `make demo` (examples/cluster.yaml, run, the kubelet moves the builds, run,
    rollout=machineconfig, the MCO renders, run), with the builder chosen, the builds seen Running
    first, and at the end the pullspec removed from the settings (Blocked)."""
    items = snapshot.load(str(F.ROOT / "examples/cluster.yaml"))
    build_config(items)["imageBuilderType"] = builder
    seen = [items]

    def run(items: list[dict[str, Any]], *codes: int) -> list[dict[str, Any]]:
        code, out, err = run_cli.run(items)
        assert code in codes, err
        seen.append(out)
        return out

    def changed(items: list[dict[str, Any]], edit) -> list[dict[str, Any]]:
        items = json.loads(json.dumps(items))
        edit(items)
        seen.append(items)
        return items

    items = run(items, 0)
    items = run(changed(items, lambda i: kubelet.apply(i, {"worker": "Running", "infra": "Running"})), 0)
    items = run(changed(items, lambda i: kubelet.apply(i, {"worker": "Succeeded", "infra": "Failed"})), 0)
    items = run(changed(items, lambda i: build_config(i).update(rollout="machineconfig")), 0)
    items = run(changed(items, mco.render), 0)
    run(changed(items, lambda i: build_config(i).pop("finalImagePullspec")), 2)
    return seen


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_demo_lifecycle_pools_and_builds(argocd, installed_cm, run_cli, builder):
    objs = {}
    for items in demo_lifecycle(run_cli, builder):
        for obj in items:
            if obj["kind"] in ("MachineConfigPool", "Build"):
                objs.setdefault(json.dumps(expected_health(obj)), obj)    # one object per distinct outcome
    found = argocd.health_of_all(list(objs.values()), installed_cm[0])
    assert found == [json.loads(k) for k in objs]
    states = {(o["metadata"].get("annotations") or {}).get(STATE) for o in objs.values()}
    assert states >= {None, "Pending", "Building", "Succeeded", "Failed", "Blocked"}
    phases = {(o.get("status") or {}).get("phase") for o in objs.values() if o["kind"] == "Build"}
    assert phases == ({None, "Running", "Complete", "Failed"} if builder == "openshift-image-builder" else set())


# --- our CronJob and PostSync Job: what a Blocked exit does to the Application -----------------------

@pytest.fixture(scope="session")
def ours(kustomize) -> dict[str, dict[str, Any]]:
    docs = kustomize(F.ROOT / "kustomize/overlays/argocd")
    return {d["kind"]: d for d in docs if d["kind"] in ("CronJob", "Job")}


def with_status(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": status}


def test_v2_14_has_no_cronjob_check_so_the_cronjob_leaves_the_apps_health_alone(argocd, installed_cm, ours):
    failed = with_status(ours["CronJob"], {"lastScheduleTime": "2026-11-29T12:05:00Z",
                                           "lastSuccessfulTime": "2026-11-29T12:00:40Z"})
    out = argocd.run(failed, installed_cm[0])
    assert out.returncode == 0 and out.stdout == "Health script is not configured for 'batch/CronJob'\n"


#: the Job controller's condition when the one Pod (backoffLimit 0) exits non-zero: exit 2 (Blocked,
#: a failed write) or 3 (the cluster cannot be read); kubernetes pkg/controller/job/job_controller.go
BACKOFF = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
           "message": "Job has reached the specified backoff limit"}


def test_a_failed_postsync_job_is_degraded_which_fails_the_sync(argocd, installed_cm, ours):
    """A hook does not count in the Application's health (controller/health.go skips hooks), but its
    health decides the sync operation: Degraded -> Failed (gitops-engine sync_context.go
    getOperationPhase), with the condition's message (health_job.go)."""
    job = ours["Job"]
    assert job["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PostSync"
    assert job["spec"]["backoffLimit"] == 0
    failed = with_status(job, {"failed": 1, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": BACKOFF["reason"], "message": BACKOFF["message"]},
        BACKOFF]})
    assert argocd.health(failed, installed_cm[0]) == {"status": "Degraded", "message": BACKOFF["message"]}
    done = with_status(job, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
    assert argocd.health(done, installed_cm[0])["status"] == "Healthy"


@pytest.fixture(scope="session")
def cronjob_cm(argocd):
    """Argo CD 3.2's CronJob check from ../shared, given as a custom check with useOpenLibs (Argo CD
    opens every library for its built-in scripts: util/lua GetHealthScript)."""
    if not (CRONJOB / "health.lua").is_file():
        pytest.skip(f"{CRONJOB} is absent (../shared is not beside this checkout): Argo CD 3.2's CronJob "
                    f"check is read from there, never copied")
    return argocd.cm({config_key("batch", "CronJob"): (CRONJOB / "health.lua").read_text(),
                      "resource.customizations.useOpenLibs.batch_CronJob": "true"})


def upstream_cases() -> dict[str, dict[str, str]]:
    test_file = CRONJOB / "health_test.yaml"
    return {p.name: e for p, e in cases(test_file)} if test_file.is_file() else {}


@pytest.mark.parametrize("input_name", sorted(upstream_cases()))
def test_argo_cds_cronjob_check_runs_its_own_tests(cronjob_results, input_name):
    assert cronjob_results[input_name] == upstream_cases()[input_name]


@pytest.fixture(scope="session")
def cronjob_results(argocd, cronjob_cm, ours) -> dict[str, dict[str, str]]:
    """The outcome of each upstream test object (by file name) and of our CronJob in each state."""
    objs = {name: load(CRONJOB / "testdata" / name) for name in upstream_cases()}
    objs.update((state, with_status(ours["CronJob"], status)) for state, (status, _) in CRONJOB_STATES.items())
    return dict(zip(objs, argocd.health_of_all(list(objs.values()), cronjob_cm), strict=True))


ACTIVE = [{"apiVersion": "batch/v1", "kind": "Job", "name": "ocl-reconciler-29400725", "namespace": F.NS}]
#: our CronJob's status after each outcome (the CronJob controller sets lastScheduleTime when it
#: creates a Job, lists it in active while it runs, and sets lastSuccessfulTime to a succeeded Job's
#: completionTime: kubernetes pkg/controller/cronjob/cronjob_controllerv2.go), and the upstream
#: test case whose outcome it must share
CRONJOB_STATES = {
    "applied, not scheduled yet": ({}, "never-scheduled.yaml"),
    "first run, running": ({"lastScheduleTime": "2026-11-29T12:00:00Z", "active": ACTIVE}, "never-succeeded.yaml"),
    "first run exited 2 (Blocked)": ({"lastScheduleTime": "2026-11-29T12:00:00Z"}, "never-succeeded.yaml"),
    "a run exited 0": ({"lastScheduleTime": "2026-11-29T12:00:00Z",
                        "lastSuccessfulTime": "2026-11-29T12:00:40Z"}, "healthy.yaml"),
    "exit 2 (Blocked) after an exit 0": ({"lastScheduleTime": "2026-11-29T12:05:00Z",
                                          "lastSuccessfulTime": "2026-11-29T12:00:40Z"}, "degraded.yaml"),
    "next run running, still Blocked": ({"lastScheduleTime": "2026-11-29T12:10:00Z", "active": ACTIVE,
                                         "lastSuccessfulTime": "2026-11-29T12:00:40Z"}, "active.yaml"),
    "exit 0 again after the fix": ({"lastScheduleTime": "2026-11-29T12:15:00Z",
                                    "lastSuccessfulTime": "2026-11-29T12:15:30Z"}, "healthy.yaml"),
}


@pytest.mark.parametrize("state", CRONJOB_STATES)
def test_argo_cd_3_2_judges_our_cronjob_after_our_exits(cronjob_results, state):
    assert cronjob_results[state] == upstream_cases()[CRONJOB_STATES[state][1]]
