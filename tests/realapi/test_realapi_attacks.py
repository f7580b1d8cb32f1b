"""Issue 31's attacks as tests (item 7): every row of its table, each sub-case apart, and every
request it lists as "refused as they should be", tried on one real kube-apiserver started for this
module. Installed as docs/admin.md installs overlays/openshift-rollout: kustomize/base and the
Components rollout (its parameter naming F.REPO and the pools worker and infra), pool-policy and
namespace-policy, as the overlays render them.

Each row is tried as the issue says: as our ServiceAccount (its own TokenRequest token), as a user
who may only get, list and patch pools (the admin impersonating `pool-editor`), or as an
administrator. Each says what refuses it, and the test asserts exactly that:
- `policy:<name>`: a 403 whose message is that ValidatingAdmissionPolicy's, from `expect` on;
- `rbac`: a 403 of RBAC's authorizer naming our ServiceAccount and `expect` (no policy involved);
- `reconciler`: the reconciler's own check, run as the ServiceAccount through the CLI: what it says
  (`expect`) and what it does (asserted by the row);
- `property`: rows 7 to 9 and the Secret canary, a property of what the reconciler writes or prints;
- `none`: not refused; `expect` says why it is left so. The row asserts that it still passes, so
  that a change shows here and in the docs.

TABLE is the one list. docs/rollout-permissions.md lists the same rows ("What an attacker can try,
and what refuses it"); test_the_docs_list_every_row_with_its_refuser keeps the two the same."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest

from reconcile.contract import annotations as A
from reconcile.contract import naming
from reconcile.core import rollout
from tests.conftest import Cli
from tests.realapi import test_realapi_namespace_policy as NSP
from tests.realapi import test_realapi_pool_policy as PP
from tests.realapi import test_realapi_rollout_policy as MC
from tests.standin.test_secret_canary import forms, leaks, secrets_with_canaries
from tests.support import factory as F
from tests.support import fakeregistry, realbuild, realserver

pytestmark = pytest.mark.realapi
DOC = F.ROOT / "docs/rollout-permissions.md"
SECTION = "## What an attacker can try, and what refuses it"
SA, EDITOR, ADMIN, OUTPUT = ("our ServiceAccount", "a user who may only patch pools", "an administrator",
                             "the reconciler's output")
EDITOR_USER = "pool-editor"
MCS, POOLS = realserver.RealAPI.path("MachineConfig"), realserver.RealAPI.path("MachineConfigPool")
JSON, JSON_PATCH, MERGE, APPLY = ("application/json", "application/json-patch+json",
                                  "application/merge-patch+json", "application/apply-patch+yaml")
EVIL = "evil.example.com/pwn/os@sha256:" + "6" * 64
LISTED = f"({', '.join(realserver.ROLLOUT_POOLS)}): "
#: settings of the rows' cluster: the MachineConfig rollout, into the repository the parameter names
SETTINGS = (F.build_config(rollout="machineconfig"), F.osimageurl(), F.secret("pull-secret"),
            F.secret("push-secret"))
#: the build's disk bounds by default (docs/contract.md, buildEphemeralStorageRequest/-Limit)
DISK_REQUEST, DISK_LIMIT = "20Gi", "80Gi"
PROXY_PASSWORD = "s3cr3t-proxy-pass"
PROXY = f"http://proxy-user:{PROXY_PASSWORD}@proxy.example.com:3128"
BY_REFERENCE = "no credentials: the build Pod's proxy env comes from Secret ocl-proxy-<pool>-<id> by secretKeyRef"
#: the Role that makes `pool-editor`: only what `oc annotate mcp` needs
EDITOR_ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "test-pool-editor"},
               "rules": [{"apiGroups": [F.MCO], "resources": ["machineconfigpools"],
                          "verbs": ["get", "list", "patch"]}]}
EDITOR_BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "test-pool-editor"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "test-pool-editor"},
                  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": EDITOR_USER}]}


class Outcome(NamedTuple):
    status: int         # the HTTP status of the attempt, or the CLI's exit code
    text: str           # the server's message, or what the reconciler printed / what was observed


@dataclass
class World:
    """One row's view of the module's server: requests as each identity, the reconciler's CLI."""
    api: realserver.RealAPI
    real: realserver.Real
    shared: dict[str, Any]
    used: set[str] = field(default_factory=set)          # who the row acted as

    def sa(self, method: str, path: str, body: Any = None, content_type: str = JSON, as_user: str = "") -> Outcome:
        """One request with the ServiceAccount's own token; its status and the server's message."""
        self.used.add(SA)
        status, answer = self.api.request(method, path, body, content_type, token=self.api.sa_token,
                                          ok=(403, 404, 409, 422), as_user=as_user)
        return Outcome(status, str(answer.get("message")) if isinstance(answer, dict) else str(answer))

    def fresh(self, settings: tuple[dict[str, Any], ...] | list[dict[str, Any]] = SETTINGS,
              extra: tuple[dict[str, Any], ...] = ()) -> None:
        """Back to the rows' cluster (scenario objects cleared): pools worker (opted in), infra and
        master (not), their rendered configs and nodes, the MCO's 00-worker, and `settings`."""
        self.api.reset()
        self.api.load(cluster(settings) + list(extra))

    def cli(self, *args: str) -> tuple[int, str, str]:
        """`ocl-reconcile ARGS` as the ServiceAccount (the CronJob's kubeconfig)."""
        return self.real.cli(*args)


def cluster(settings: tuple[dict[str, Any], ...] | list[dict[str, Any]] = SETTINGS) -> list[dict[str, Any]]:
    return F.cluster(F.pool("worker"), F.pool("infra", opted_in=False), F.pool("master", opted_in=False),
                     settings=list(settings)) + [MC.admins("00-worker")]


def mc_for(api: realserver.RealAPI, pool: str, **spec: Any) -> dict[str, Any]:
    """Our MachineConfig for `pool` as `rollout: machineconfig` writes it, owned by that pool (no
    owner when there is no such pool)."""
    obj = MC.ours(api, pool, **spec)
    owner = api.get("MachineConfigPool", "", pool)
    if owner is None:
        del obj["metadata"]["ownerReferences"]
    else:
        obj["metadata"]["ownerReferences"][0].update(name=pool, uid=owner["metadata"]["uid"])
    return obj


def pool_patch(pool: str, *ops: dict[str, Any]) -> Callable[[World], Outcome]:
    return lambda w: w.sa("PATCH", f"{POOLS}/{pool}", list(ops), JSON_PATCH)


# --- row 2: unpausing an administrator's pause ------------------------------------------------------

def unpause_master(w: World) -> Outcome:
    """An administrator paused master (to hold an upgrade); the token unpauses it."""
    w.api.request("PATCH", f"{POOLS}/master", {"spec": {"paused": True}}, MERGE)
    try:
        return w.sa("PATCH", f"{POOLS}/master", [{"op": "replace", "path": "/spec/paused", "value": False}],
                    JSON_PATCH)
    finally:
        w.api.request("PATCH", f"{POOLS}/master", {"spec": {"paused": None}}, MERGE)


# --- rows 3 and 4: the pool editor writes the image history -----------------------------------------

def annotate_as_editor(w: World, pool: str, value: str) -> None:
    """`oc annotate mcp POOL ocl-reconciler.io/images=VALUE --overwrite`, as the pool editor."""
    w.used.add(EDITOR)
    w.api.kubectl("annotate", "mcp", pool, f"{A.IMAGES}={value}", "--overwrite", "--as", EDITOR_USER,
                  kubeconfig=w.real.admin)
    assert w.real.ann(pool)[A.IMAGES] == value


class TheirRegistry(fakeregistry.FakeRegistry):
    """The fake registry, every request it gets recorded (the version check `/v2/` too)."""
    requests: list[str] = []

    def log_message(self, *args: Any) -> None:
        type(self).requests.append(self.requestline)


def reuse_from_another_registry(w: World) -> Outcome:
    """The build is running; the editor maps its build id to an image in a registry of theirs (which
    answers that it has it, labelled with that build id, and takes our push credentials); the build
    fails for a transient reason, so the next run looks for an image to reuse before retrying."""
    TheirRegistry.requests = []
    with fakeregistry.serve(TheirRegistry, manifests=set()) as host:
        push = F.secret("push-secret", payload={"auths": {**fakeregistry.auths(host),
                                                          "registry.example.com:5000": {"auth": "dTpw"}}})
        w.fresh(SETTINGS[:3] + (push,))
        code, err = w.real.run()
        assert code == 0 and w.real.ann()[A.STATE] == A.PENDING, err
        build_id = w.real.build_object()["metadata"]["labels"][naming.BUILD_ID_LABEL]
        evil = f"{host}/evil/os@{TheirRegistry.push({naming.BUILD_ID_LABEL: build_id})}"
        annotate_as_editor(w, "worker", f"{build_id}={evil}")
        w.real.finish("Evicted")
        code, err = w.real.run()
        asked = list(TheirRegistry.requests)
    assert code == 0, err
    a = w.real.ann()
    assert (a[A.STATE], a[A.ATTEMPT], A.IMAGE in a) == (A.PENDING, "2", False), a       # built again
    assert asked == []                                                  # the registry was never asked
    assert not [m for m in w.api.list("MachineConfig") if evil in json.dumps(m.get("spec"))]
    return Outcome(code, err.replace(evil, "<their image>"))


def prune_other_repositories(w: World) -> Outcome:
    """After a success, the editor adds three old entries: one of our repository (pruned: the
    control), and two of other teams' repositories on the same registry, which the push Secret's
    credentials also cover; then `run --keep-images 1`."""
    reg = w.shared["registry"]()
    repo = f"{reg.host}/ocl/os-image"
    w.fresh([F.build_config(finalImagePullspec=f"{repo}:latest"), F.osimageurl(), F.secret("pull-secret"),
             F.secret("push-secret", payload={"auths": {reg.host: {"auth": "dTpw"}}})])
    assert w.real.run()[0] == 0
    build_id = w.real.build_object()["metadata"]["labels"][naming.BUILD_ID_LABEL]
    w.real.finish("Succeeded", digest=realbuild.push_image(reg, "ocl/os-image", "current",
                                                           {naming.BUILD_ID_LABEL: build_id}))
    code, err = w.real.run()
    assert code == 0 and w.real.ann()[A.STATE] == A.SUCCEEDED, err
    current = w.real.ann()[A.IMAGES]
    old = {"ocl/os-image": realbuild.push_image(reg, "ocl/os-image", "old"),
           "victim/app": realbuild.push_image(reg, "victim/app", "app"),
           "other-team/db": realbuild.push_image(reg, "other-team/db", "db")}
    entries = [f"old{i}={reg.host}/{name}@{digest}" for i, (name, digest) in enumerate(old.items())]
    annotate_as_editor(w, "worker", " ".join([current, *entries]))
    code, err = w.real.run("--keep-images", "1")
    assert code == 0, err
    assert w.real.ann()[A.IMAGES] == current
    assert {name: realbuild.has_manifest(reg, name, digest) for name, digest in old.items()} == {
        "ocl/os-image": False, "victim/app": True, "other-team/db": True}
    for digest in old.values():
        err = err.replace(digest, "<digest>")
    err = err.replace(reg.host, "<registry>")
    assert "image <registry>/other-team/db@<digest> is not in the configured repository" in err, err
    return Outcome(code, err)


# --- row 5: MachineConfigs named like ours that we did not write -------------------------------------

def strays(w: World) -> list[dict[str, Any]]:
    """An administrator made ocl-osimageurl-master and -ghost, labelled as ours."""
    w.fresh()
    made = [w.api.create(mc_for(w.api, pool)) for pool in ("master", "ghost")]
    w.used.add(ADMIN)
    return made


def run_with_strays(w: World) -> Outcome:
    """`run` reports each (a warning, an Event on the pool it names, the gauge) and, since each
    carries our label and name, deletes it with its uid as the precondition (docs/rollout-permissions.md)."""
    made = strays(w)
    metrics = w.real.tmp / "metrics.prom"
    code, err = w.real.run("--metrics-file", str(metrics))
    assert code == 0, err
    # ours by label and name, for a pool we do not build: deleted, as an opt-out deletes ours
    assert [w.api.get("MachineConfig", "", m["metadata"]["name"]) for m in made] == [None, None]
    assert f"deleted MachineConfig {rollout.name('master')}" in err
    assert [e["type"] for e in w.real.events("master") if e["reason"] == "StrayMachineConfig"] == ["Warning"]
    assert "ocl_stray_machineconfigs 2.0" in metrics.read_text().splitlines()
    return Outcome(code, err)


def preflight_with_strays(w: World) -> Outcome:
    strays(w)
    code, out, _ = w.cli("preflight", "-o", "json")
    lines = [line for line in json.loads(out) if line["check"] == "stray-machineconfigs"]
    assert code == 2 and {line["result"] for line in lines} == {"fail"}, lines
    return Outcome(code, "\n".join(line["message"] for line in lines))


# --- row 6: reading a Secret of our namespace ----------------------------------------------------

def read_unrelated_secret(w: World) -> Outcome:
    theirs = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "someone-elses", "namespace": F.NS},
              "data": {"token": "bm90IG91cnM="}}
    w.api.request("POST", realserver.RealAPI.path("Secret", F.NS), theirs, ok=(409,))
    status, body = w.api.request("GET", realserver.RealAPI.path("Secret", F.NS, "someone-elses"),
                                 token=w.api.sa_token)
    w.used.add(SA)
    assert body["data"] == theirs["data"]
    return Outcome(status, "")


# --- rows 7 to 9: what the reconciler writes and prints -----------------------------------------

def build_pod(w: World) -> dict[str, Any]:
    """The build Pod a run creates, as the real server stored it (defaulted, validated); once."""
    if "pod" not in w.shared:
        w.fresh()
        assert w.real.run()[0] == 0
        w.shared["pod"] = w.real.build_object()
    w.used.add(OUTPUT)
    return w.shared["pod"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["spec"].get("initContainers", []) + pod["spec"]["containers"]


def seccomp(w: World) -> Outcome:
    """None set, as the MCO's build Pod sets none: the anyuid SCC refuses any profile, and the
    runtime's default filter stops rootless buildah (docs/design.md, measured in tests/realbuild)."""
    pod = build_pod(w)
    found = {"pod": (pod["spec"].get("securityContext") or {}).get("seccompProfile"),
             **{c["name"]: (c.get("securityContext") or {}).get("seccompProfile") for c in containers(pod)}}
    ok = set(found.values()) == {None}
    return Outcome(0, "no seccompProfile on the Pod or a container" if ok else f"seccompProfile: {found}")


def empty_dirs(w: World) -> Outcome:
    found = {v["name"]: v["emptyDir"].get("sizeLimit") for v in build_pod(w)["spec"]["volumes"] if "emptyDir" in v}
    ok = bool(found) and set(found.values()) == {DISK_LIMIT}
    return Outcome(0, f"every emptyDir has sizeLimit {DISK_LIMIT}" if ok else f"emptyDir sizeLimit: {found}")


def disk(w: World) -> Outcome:
    found = {c["name"]: ((c.get("resources") or {}).get("requests", {}).get("ephemeral-storage"),
                         (c.get("resources") or {}).get("limits", {}).get("ephemeral-storage"))
             for c in containers(build_pod(w))}
    ok = set(found.values()) == {(DISK_REQUEST, DISK_LIMIT)}
    return Outcome(0, f"ephemeral-storage request {DISK_REQUEST}, limit {DISK_LIMIT} on every container" if ok
                   else f"ephemeral-storage: {found}")


def snapshot_mode(w: World) -> Outcome:
    w.used.add(OUTPUT)
    cli = Cli(w.real.tmp, w.real.capsys)
    code, items, err = cli.run(F.cluster())
    assert code == 0 and any(o["kind"] == "Secret" for o in items), err      # it holds every Secret
    mode = os.stat(w.real.tmp / f"out-{cli.count}.yaml").st_mode & 0o777
    return Outcome(code, f"the file is mode {mode:#o}")


def proxy_output(*args: str) -> Callable[[World], Outcome]:
    """The cluster Proxy holds credentials; `ocl-reconcile ARGS` prints the build Pod, whose proxy
    env names our Secret `ocl-proxy-<pool>-<id>` (secretKeyRef) instead of holding the value."""
    def attempt(w: World) -> Outcome:
        w.fresh(extra=({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
                        "spec": {}, "status": {"httpProxy": PROXY, "httpsProxy": PROXY}},))
        w.used.add(OUTPUT)
        code, out, err = w.cli(*args)
        assert code in (0, 1), err
        by_ref = "secretKeyRef" in out and re.search(r"ocl-proxy-worker-[0-9a-f]{12}", out)
        if PROXY_PASSWORD in out + err or not by_ref:
            return Outcome(code, out + err)
        return Outcome(code, BY_REFERENCE)
    return attempt


def canaries(w: World) -> Outcome:
    """Every Secret holds a canary (tests/standin/test_secret_canary.py); every command, run as the
    ServiceAccount against the real server, shows none of them in any form."""
    w.fresh([F.build_config(), F.osimageurl(), *secrets_with_canaries()])
    w.used.add(OUTPUT)
    watched = forms(w.api.list("Secret", F.NS))
    commands = (("run", "-v"), ("diff", "-v"), ("render",), ("status", "-o", "wide"), ("explain", "worker"),
                ("preflight",), ("diff", "-o", "json", "--log-format", "json", "-v"))
    found = {" ".join(c): leaks("".join(w.cli(*c)[1:]), watched) for c in commands}
    found = {c: f for c, f in found.items() if f}
    return Outcome(0, f"no Secret canary in the output of {len(commands)} commands" if not found else str(found))


# --- the rows ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    id: str
    tried: str
    who: str
    refuser: str            # policy:<name> | rbac | reconciler | property | none
    expect: str             # the message from its start (policy), a fragment (rbac, reconciler), the property
    attempt: Callable[[World], Outcome]


ROLLOUT, POOL, NAMESPACE = (f"policy:{realserver.ROLLOUT_POLICY}", f"policy:{realserver.POOL_POLICY}",
                            f"policy:{realserver.NAMESPACE_POLICY}")
SECRET_PATH, POD_PATH = realserver.RealAPI.path("Secret", F.NS), realserver.RealAPI.path("Pod", F.NS)
NOT_OURS = "ocl-reconciler may change " + MC.OLD_RULE + "00-worker is not one"

TABLE: tuple[Row, ...] = (
    # 1: our MachineConfig for a pool not listed, or with another repository's image
    Row("1a", "create `ocl-osimageurl-master` (master not opted in)", SA, ROLLOUT,
        MC.POOL_RULE + LISTED + "ocl-osimageurl-master is for pool master",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "master"))),
    Row("1b", "create `ocl-osimageurl-nosuchpool`", SA, ROLLOUT,
        MC.POOL_RULE + LISTED + "ocl-osimageurl-nosuchpool is for pool nosuchpool",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "nosuchpool"))),
    Row("1c", "create `ocl-osimageurl-infra` pointing at `evil.example.com/pwn/os@sha256:...`", SA, ROLLOUT,
        MC.REPO_RULE + f"({F.REPO}): ocl-osimageurl-infra sets {EVIL}",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "infra", osImageURL=EVIL))),
    Row("1d", "1c by server-side apply", SA, ROLLOUT,
        MC.REPO_RULE + f"({F.REPO}): ocl-osimageurl-infra sets {EVIL}",
        lambda w: w.sa("PATCH", f"{MCS}/ocl-osimageurl-infra?fieldManager=ocl-reconciler",
                       mc_for(w.api, "infra", osImageURL=EVIL), APPLY)),
    # 2: a pool's spec, labels and pause
    Row("2a", "pause master", SA, POOL, PP.PAUSE_RULE + "master sets spec.paused to true",
        pool_patch("master", {"op": "add", "path": "/spec/paused", "value": True})),
    Row("2b", "unpause master that an administrator paused", SA, POOL, PP.PAUSE_RULE + "master sets spec.paused to false",
        unpause_master),
    Row("2c", "set master's `maxUnavailable: 100%`", SA, POOL, PP.SPEC_RULE + "master changes spec.maxUnavailable",
        pool_patch("master", {"op": "add", "path": "/spec/maxUnavailable", "value": "100%"})),
    Row("2d", "point worker's `nodeSelector` at the master label", SA, POOL,
        PP.SPEC_RULE + "worker changes spec.nodeSelector",
        pool_patch("worker", {"op": "replace", "path": "/spec/nodeSelector",
                              "value": {"matchLabels": {"node-role.kubernetes.io/master": ""}}})),
    Row("2e", "widen master's `machineConfigSelector` to worker's role", SA, POOL,
        PP.SPEC_RULE + "master changes spec.machineConfigSelector",
        pool_patch("master", {"op": "replace", "path": "/spec/machineConfigSelector", "value": {"matchExpressions": [
            {"key": f"{F.MCO}/role", "operator": "In", "values": ["master", "worker"]}]}})),
    Row("2f", "add the opt-in label to master", SA, POOL, PP.LABEL_RULE + f"master adds {A.LAYERING_LABEL}",
        pool_patch("master", {"op": "add", "path": PP.label(A.LAYERING_LABEL), "value": ""})),
    Row("2g", "remove master's `nodeSelector`", SA, POOL, PP.SPEC_RULE + "master changes spec.nodeSelector",
        pool_patch("master", {"op": "remove", "path": "/spec/nodeSelector"})),
    Row("2h", f"write our hold record `{A.GATE}=held` on master, to unpause it as ours", SA, POOL,
        PP.GATE_RULE + "master",
        pool_patch("master", {"op": "add", "path": PP.ann(A.GATE), "value": "held"})),
    # 3, 4: the image history, written by someone who may patch pools
    Row("3a", "map the running build's id to an image in another registry in "
              f"`{A.IMAGES}`; the build fails; `run`", EDITOR, "reconciler",
        f"not reused: <their image> is not in the configured repository {F.REPO}", reuse_from_another_registry),
    Row("4a", f"add other teams' images of the push registry to `{A.IMAGES}`; `run --keep-images 1`", EDITOR,
        "reconciler", "image <registry>/victim/app@<digest> is not in the configured repository "
                      "<registry>/ocl/os-image: dropped from the image history, not deleted", prune_other_repositories),
    # 5: MachineConfigs named like ours
    Row("5a", "create `ocl-osimageurl-ghost`", SA, ROLLOUT,
        MC.POOL_RULE + LISTED + "ocl-osimageurl-ghost is for pool ghost",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "ghost"))),
    Row("5b", "create `ocl-osimageurl-master` and `-ghost` labelled ours; `run`", ADMIN, "reconciler",
        "stray MachineConfig ocl-osimageurl-ghost: no MachineConfigPool ghost exists; the reconciler did not "
        "write it", run_with_strays),
    Row("5c", "the same; `preflight`", ADMIN, "reconciler",
        "stray MachineConfig ocl-osimageurl-master: pool master is not opted in and was never built; "
        "the reconciler did not write it", preflight_with_strays),
    # 6: our namespace
    Row("6a", "read a Secret of our namespace that is not ours", SA, "none",
        "RBAC cannot narrow get and list of Secrets to some of a namespace, and admission does not see reads",
        read_unrelated_secret),
    Row("6b", "create a `kubernetes.io/service-account-token` Secret for itself", SA, NAMESPACE,
        f"ocl-reconciler may not create a Secret of type {NSP.TOKEN_TYPE}: mine",
        lambda w: w.sa("POST", SECRET_PATH, NSP.token_secret("mine", "ocl-reconciler"))),
    Row("6c", "the same for another ServiceAccount (`ocl-builder`)", SA, NAMESPACE,
        f"ocl-reconciler may not create a Secret of type {NSP.TOKEN_TYPE}: builders",
        lambda w: w.sa("POST", SECRET_PATH, NSP.token_secret("builders", "ocl-builder"))),
    Row("6d", "create a Pod that runs as another ServiceAccount (`default`) with its token mounted", SA, NAMESPACE,
        "ocl-reconciler may create only Pods that run as the ServiceAccount ocl-builder: as-default runs as default",
        lambda w: w.sa("POST", POD_PATH, NSP.pod("as-default", "default", automount=True))),
    Row("6e", "create a Pod as `ocl-builder` with `automountServiceAccountToken: true`", SA, NAMESPACE,
        "ocl-reconciler may create only Pods with automountServiceAccountToken: false: automount",
        lambda w: w.sa("POST", POD_PATH, NSP.pod("automount", "ocl-builder", automount=True))),
    # 7 to 9: what the reconciler writes and prints
    Row("7a", "the build Pod's seccomp profile", OUTPUT, "property",
        "no seccompProfile on the Pod or a container", seccomp),
    Row("7b", "the build Pod's emptyDir", OUTPUT, "property", f"every emptyDir has sizeLimit {DISK_LIMIT}", empty_dirs),
    Row("7c", "the build Pod's disk", OUTPUT, "property",
        f"ephemeral-storage request {DISK_REQUEST}, limit {DISK_LIMIT} on every container", disk),
    Row("8a", "`run --write-snapshot`", OUTPUT, "property", "the file is mode 0o600", snapshot_mode),
    Row("9a", "a proxy `http://user:pass@proxy`: `diff`", OUTPUT, "property", BY_REFERENCE, proxy_output("diff")),
    Row("9b", "the same: `diff -o json`", OUTPUT, "property", BY_REFERENCE, proxy_output("diff", "-o", "json")),
    Row("9c", "the same: `render`", OUTPUT, "property", BY_REFERENCE, proxy_output("render")),
    # refused as they should be, and to stay so
    Row("R-foreign-patch", "add our label to the MCO's `00-worker`", SA, ROLLOUT, NOT_OURS,
        lambda w: w.sa("PATCH", f"{MCS}/00-worker", MC.add_our_label(), JSON_PATCH)),
    Row("R-foreign-delete", "delete `00-worker`", SA, ROLLOUT,
        "ocl-reconciler may delete " + MC.OLD_RULE + "00-worker is not one",
        lambda w: w.sa("DELETE", f"{MCS}/00-worker")),
    Row("R-ignition", "an Ignition config in ours", SA, ROLLOUT, MC.SPEC_RULE + "ocl-osimageurl-worker sets spec.config",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "worker", config={"ignition": {"version": "3.4.0"}}))),
    Row("R-kernel-arguments", "a kernel argument in ours", SA, ROLLOUT,
        MC.SPEC_RULE + "ocl-osimageurl-worker sets spec.kernelArguments",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "worker", kernelArguments=["nosmt"]))),
    Row("R-role-label", "a role label that differs from the name", SA, ROLLOUT,
        MC.NAME_RULE + "ocl-osimageurl-infra has role worker",
        lambda w: w.sa("POST", MCS, MC.ours(w.api, "worker", name="ocl-osimageurl-infra"))),
    Row("R-tag", "a tag instead of a digest", SA, ROLLOUT,
        "ocl-reconciler may set spec.osImageURL only to an image by digest (<repo>@sha256:<64 hex>): "
        f"ocl-osimageurl-worker sets {F.REPO}:latest",
        lambda w: w.sa("POST", MCS, mc_for(w.api, "worker", osImageURL=F.REPO + ":latest"))),
    Row("R-status", "write a pool's status subresource", SA, "rbac", 'cannot patch resource "machineconfigpools/status"',
        lambda w: w.sa("PATCH", f"{POOLS}/worker/status", {"status": {"machineCount": 0}}, MERGE)),
    Row("R-nodes", "label a Node", SA, "rbac", 'cannot patch resource "nodes"',
        lambda w: w.sa("PATCH", "/api/v1/nodes/worker-0", {"metadata": {"labels": {"x": "y"}}}, MERGE)),
    Row("R-secret-mco", "read the node bootstrap token in the MCO's namespace", SA, "rbac",
        'cannot get resource "secrets" in API group "" in the namespace "openshift-machine-config-operator"',
        lambda w: w.sa("GET", realserver.RealAPI.path("Secret", F.MCO_NS, "node-bootstrapper-token"))),
    Row("R-secret-config", "read a Secret of `openshift-config` but `pull-secret`", SA, "rbac",
        'cannot get resource "secrets" in API group "" in the namespace "openshift-config"',
        lambda w: w.sa("GET", realserver.RealAPI.path("Secret", "openshift-config", "etcd-client"))),
    Row("R-secret-list", "list the Secrets of every namespace", SA, "rbac",
        'cannot list resource "secrets" in API group "" at the cluster scope',
        lambda w: w.sa("GET", "/api/v1/secrets")),
    Row("R-exec", "exec into a Pod of our namespace", SA, "rbac", 'cannot create resource "pods/exec"',
        lambda w: w.sa("POST", f"{POD_PATH}/any/exec?command=sh&stdout=true")),
    Row("R-attach", "attach to a Pod of our namespace", SA, "rbac", 'cannot create resource "pods/attach"',
        lambda w: w.sa("POST", f"{POD_PATH}/any/attach?stdout=true")),
    Row("R-token", "request a token for `ocl-builder`", SA, "rbac", 'cannot create resource "serviceaccounts/token"',
        lambda w: w.sa("POST", realserver.RealAPI.path("ServiceAccount", F.NS, "ocl-builder") + "/token",
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
    Row("R-bind", "bind `cluster-admin` to itself in our namespace", SA, "rbac",
        'cannot create resource "rolebindings"',
        lambda w: w.sa("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{F.NS}/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "mine"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "ocl-reconciler", "namespace": F.NS}]})),
    Row("R-escalate", "add a rule to its own ClusterRole", SA, "rbac", 'cannot patch resource "clusterroles"',
        lambda w: w.sa("PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/ocl-reconciler", [
            {"op": "add", "path": "/rules/-", "value": {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}}],
            JSON_PATCH)),
    Row("R-impersonate", "impersonate `system:admin`", SA, "rbac", 'cannot impersonate resource "users"',
        lambda w: w.sa("GET", POOLS, as_user="system:admin")),
    Row("R-canary", "every Secret canary in every output (run, diff, render, status, explain, preflight)", OUTPUT,
        "property", "no Secret canary in the output of 7 commands", canaries),
)


# --- the server, and the test -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The module's own server, installed as overlays/openshift-rollout installs it, with the pool
    editor's Role, the rows' cluster, and (started when a row first needs it) a registry."""
    root = tmp_path_factory.mktemp("attacks")
    api = realserver.start_installed(root)
    registries: list[realbuild.Registry] = []

    def registry() -> realbuild.Registry:
        if not registries:
            realbuild.require_registry()
            registries.append(realbuild.Registry(root))
        return registries[0]
    try:
        api.install_rollout()
        api.install_pool_policy()
        api.install_namespace_policy()
        api.request("POST", realserver.ROLLOUT_PATHS["ClusterRole"], EDITOR_ROLE)
        api.request("POST", realserver.ROLLOUT_PATHS["ClusterRoleBinding"], EDITOR_BINDING)
        api.load(cluster())
        yield api, {"registry": registry}
    finally:
        for reg in registries:
            reg.stop()
        api.stop()


@pytest.mark.parametrize("row", TABLE, ids=[r.id for r in TABLE])
def test_the_attack_is_refused_by_what_the_table_says(installed, row, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    api, shared = installed
    w = World(api, realserver.Real(api, tmp_path, capsys), shared)
    status, text = row.attempt(w)
    assert w.used == {row.who}, w.used
    kind, _, policy = row.refuser.partition(":")
    if kind == "policy":
        assert status == 403, text
        assert f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: {row.expect}" in text
    elif kind == "rbac":
        assert status == 403 and "ValidatingAdmissionPolicy" not in text, text
        assert f'User "{realserver.RECONCILER}" {row.expect}' in text, text
    elif kind in ("reconciler", "property"):
        assert row.expect in text, text
    else:
        assert (kind, status < 300) == ("none", True), (row.refuser, status, text)


# --- the docs list the same rows ------------------------------------------------------------------

def doc_rows() -> dict[str, list[str]]:
    """The table under SECTION in docs/rollout-permissions.md: id -> its cells."""
    lines = DOC.read_text().split(SECTION, 1)[1].splitlines()
    rows = [line for line in lines[lines.index(next(x for x in lines if x.startswith("|"))):]]
    rows = rows[:next((i for i, line in enumerate(rows) if not line.startswith("|")), len(rows))]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in rows[2:]]
    return {c[0]: c for c in cells}


def test_the_docs_list_every_row_with_its_refuser():
    """The same ids, what was tried, as whom, what refuses it, and the message (or the property)."""
    rows = doc_rows()
    assert list(rows) == [r.id for r in TABLE]
    for r in TABLE:
        doc_id, tried, who, refuser, outcome = rows[r.id]
        assert (tried, who, refuser) == (r.tried, r.who, f"`{r.refuser}`"), r.id
        assert r.expect in outcome.replace("\\|", "|"), (r.id, outcome)
