"""Harness for the realapi suite: a real etcd and kube-apiserver (built from the Go modules pinned in
`tests/tools/realapi/go.mod` by `tests/tools/realapi/build.sh`) on 127.0.0.1 with free ports.

The server authenticates two static admin tokens (group system:masters: `admin`, whose kubeconfig
the product, kubectl and the MCO's controllers use, and the tests' own client) and ServiceAccount
tokens signed by a key made here and issued through the TokenRequest API; authorizes with RBAC; runs
the admission plugins that matter to us; and writes an audit log, the source of truth for request
counts (of every request but the tests' own client's reads). It serves the openshift/api CRDs for
MachineConfigPool, MachineConfig and OSImageStream (from `../shared/schemas/`), Proxy (`tests/tools/realapi/crds/`), and a CRD for `build.openshift.io/v1` Builds
made from the Build schema in `../shared/schemas/jsonschema/` (OpenShift serves Builds from its own
API server: a CRD gives their shape and the RBAC and audit of a real server, not OpenShift's build
admission or defaulting; see docs/development.md). The MCO's own two ValidatingAdmissionPolicies for
pools (`../shared/schemas/mco-policies/`, unchanged) are installed with the product and enforced in
every test: pools must select the worker role, and name only streams the `OSImageStream` `cluster`
lists, which exists from the start with no status (as before the MCO fills it).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile import cli
from reconcile.cluster.live import api_prefix
from reconcile.contract import naming, objects, yamlio
from reconcile.core import events
from tests.support import factory as F
from tests.support import requirement

HERE = Path(__file__).resolve().parent.parent / "tools" / "realapi"
#: .ci/run sets this so that missing binaries fail the suite instead of skipping it.
REQUIRE = "OCL_REALAPI"
ADMIN_TOKEN = "ocl-test-admin-token"
#: the tests' own client (RealAPI.request): a cluster admin as well, but its own user, so that the
#: audit log can leave out its reads (AUDIT_POLICY)
HARNESS, HARNESS_TOKEN = "ocl-test-harness", "ocl-test-harness-token"
RECONCILER = f"system:serviceaccount:{F.NS}:ocl-reconciler"
#: StorageObjectInUseProtection puts the pvc-protection finalizer on every PersistentVolumeClaim
#: (kubernetes/kubernetes plugin/pkg/admission/storage/storageobjectinuseprotection): with no
#: controller here to take it off, a deleted one stays Terminating, as one a Pod still mounts does
ADMISSION = ("NamespaceLifecycle,ServiceAccount,PodSecurity,OwnerReferencesPermissionEnforcement,"
             "DefaultTolerationSeconds,LimitRanger,StorageObjectInUseProtection")
#: openshift/api's CRDs (MachineConfigPool, MachineConfig, and OSImageStream: openshift/api
#: machineconfiguration/v1 types_osimagestream.go, its CRD as ../shared/schemas keeps it, approved in
#: openshift/api#2555) and the Proxy re-expressed here
CRDS = (F.SHARED / "schemas/machineconfigpools.crd.yaml", F.SHARED / "schemas/machineconfigs.crd.yaml",
        F.SHARED / "schemas/osimagestreams.crd.yaml", HERE / "crds/proxies.crd.yaml")
BUILD_SCHEMA = F.SHARED / "schemas/jsonschema/build-build-v1.json"
#: CRDs read from the MCO's source snapshot (openshift/api as it vendors it): MachineConfiguration
#: (operator.openshift.io/v1), whose node disruption policy status a run reads (issue 39)
MCO_SRC = F.SHARED / "mco/mco-src.tar.gz"
MCO_SRC_CRDS = ("vendor/github.com/openshift/api/operator/v1/zz_generated.crd-manifests/"
                "0000_80_machine-config_01_machineconfigurations.crd.yaml",)
#: openshift/api's ClusterImagePolicy CRD (config.openshift.io/v1), in the same snapshot: not served
#: by default (UNSERVED); a module that needs it serves it for its own tests (RealAPI.serving)
IMAGE_POLICY_CRD = ("vendor/github.com/openshift/api/config/v1/zz_generated.crd-manifests/"
                    "0000_10_config-operator_01_clusterimagepolicies.crd.yaml")
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#: every request at Metadata, but the tests' own reads (their polls are most of the requests, and
#: logging one costs the server about a sixth of serving it): what audit() needs of those is its
#: marker, a GET of a namespace
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata", "users": [HARNESS], "verbs": ["get"],
                           "resources": [{"group": "", "resources": ["namespaces"]}]},
                          {"level": "None", "users": [HARNESS], "verbs": ["get", "list", "watch"]},
                          {"level": "Metadata"}]}
#: kind -> (API path prefix, plural, namespaced): what reset() clears and load() writes; the
#: product's kinds table, plus what only the harness writes
KINDS = {kind: (api_prefix(api_version), plural, namespaced)
         for kind, (api_version, namespaced, plural) in objects.KINDS.items()} | {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True), "Namespace": ("/api/v1", "namespaces", False)}
#: kinds of ours the server does not serve (a cluster before 4.16 has no ClusterImagePolicy; the
#: reconciler reads none then): test_realapi_image_policy and test_realapi_rbac serve that CRD for
#: their own tests only (RealAPI.serving)
UNSERVED = {"ClusterImagePolicy"}
STATUS_KINDS = {"Pod", "Build", "MachineConfigPool", "Proxy", "Node", "OSImageStream"}
#: the cluster's own namespaces, there before we are installed; ours (F.NS) is made by kustomize/base
NAMESPACES = (F.MCO_NS, "openshift-config")
#: the PrometheusRule of overlays/openshift: its kind served as OpenShift's monitoring serves it
PROMETHEUSRULE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"kind": "PrometheusRule", "listKind": "PrometheusRuleList", "plural": "prometheusrules",
                       "singular": "prometheusrule"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object",
                                                           "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
#: where scenarios leave objects: ours, the cluster's, and `default` for Events about pools
SCENARIO_NAMESPACES = (F.NS, *NAMESPACES, "default")
#: what RealAPI.items() reads: these kinds in SCENARIO_NAMESPACES, and these cluster-scoped ones
ITEM_KINDS = ("ConfigMap", "Secret", "Pod", "Build", "PersistentVolumeClaim", "Event", "Lease")
ITEM_CLUSTER_KINDS = ("MachineConfigPool", "MachineConfig", "Proxy", "Node")
#: objects of these kinds in these namespaces are part of the fixture, never cleared
KEEP = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt"), ("OSImageStream", "cluster"),
        ("ConfigMap", "ocl-reconciler-rollout"),
        # the cluster's singleton the MCO's controllers read (tests/support/mcoreal.py installs it)
        ("MachineConfiguration", "cluster")}      # the rollout component's parameter (install_rollout)
#: the MCO's admission policies for pools (openshift/machine-config-operator
#: manifests/machineconfigcontroller/), unchanged, and the OSImageStream that is the OS-stream
#: policy's param (its binding's paramRef `cluster`): without it every pool write is denied
MCO_POLICIES = F.SHARED / "schemas/mco-policies"
SELECTOR_POLICY, STREAM_POLICY = "custom-machine-config-pool-selector", \
    "machineconfigpool-osimagestream-reference-validation"
BARE_STREAMS = {"apiVersion": f"{F.MCO}/v1", "kind": "OSImageStream", "metadata": {"name": "cluster"},
                "spec": {"defaultStream": "rhel-9"}}
#: kustomize/components/rollout, through the example overlay that adds it to overlays/openshift:
#: its objects are what the first renders and the second does not (install_rollout())
ROLLOUT_OVERLAY, ROLLOUT_WITHOUT = (F.ROOT / "kustomize/overlays/openshift-rollout",
                                    F.ROOT / "kustomize/overlays/openshift")
#: the component's kinds (all cluster-scoped) -> their collection
ROLLOUT_PATHS = {
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding":
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"}
ROLLOUT_POLICY = "ocl-reconciler-rollout"
#: the policy's parameter (kustomize/components/rollout/params.yaml): an administrator's ConfigMap
#: naming the repository and the pools our ServiceAccount may write MachineConfigs for.
#: install_rollout() writes it with these (the repository of F.build_config() and the pools the
#: scenarios opt in), as the docs tell an administrator to; write_rollout_params() changes it
ROLLOUT_PARAMS_NS, ROLLOUT_PARAMS = "openshift-config", "ocl-reconciler-rollout"
ROLLOUT_POOLS = ("worker", "infra")


def rollout_params(repository: str = F.REPO, pools: tuple[str, ...] | list[str] = ROLLOUT_POOLS) -> dict[str, Any]:
    """The parameter ConfigMap as an administrator edits it (docs/admin.md)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROLLOUT_PARAMS, "namespace": ROLLOUT_PARAMS_NS,
                         "labels": {"app.kubernetes.io/name": "ocl-reconciler",
                                    "app.kubernetes.io/component": "rollout"}},
            "data": {"repository": repository, "pools": ", ".join(pools)}}


#: kube-apiserver tears the param informer of a paramKind down for good (per process) once no
#: binding names that paramKind for one refresh tick, and the policy then sees its parameter as it
#: last was (kubernetes/kubernetes#130887; deleting the binding is enough). Tests remove and
#: reinstall the component, so this inert policy and binding, made once and never removed, keep a
#: ConfigMap paramKind in use: it matches only the deletion of a Lease named by a match condition
#: that is never true.
PARAM_KEEPER = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
     "metadata": {"name": "test-param-keeper"},
     "spec": {"failurePolicy": "Ignore", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
              "matchConstraints": {"resourceRules": [{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                                                      "operations": ["DELETE"], "resources": ["leases"]}]},
              "matchConditions": [{"name": "never", "expression": "false"}],
              "validations": [{"expression": "true"}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
     "metadata": {"name": "test-param-keeper"},
     "spec": {"policyName": "test-param-keeper", "validationActions": ["Deny"],
              "paramRef": {"name": ROLLOUT_PARAMS, "namespace": ROLLOUT_PARAMS_NS,
                           "parameterNotFoundAction": "Allow"}}}]


def object_path(obj: dict[str, Any]) -> str:
    """The path of one of the rollout component's (or the pool policy's) objects."""
    if obj["kind"] == "ConfigMap":
        return f"/api/v1/namespaces/{obj['metadata']['namespace']}/configmaps/{obj['metadata']['name']}"
    return f"{ROLLOUT_PATHS[obj['kind']]}/{obj['metadata']['name']}"
#: kustomize/components/pool-policy: what overlays/openshift adds to overlays/openshift-4.16 (the
#: policy on pools and its binding; install_pool_policy())
POOL_POLICY_OVERLAY, POOL_POLICY_WITHOUT = (F.ROOT / "kustomize/overlays/openshift",
                                            F.ROOT / "kustomize/overlays/openshift-4.16")
POOL_POLICY = "ocl-reconciler-pools"
NAMESPACE_POLICY = "ocl-reconciler-namespace"


def cache_dir() -> Path:
    versions = {}
    for line in (HERE / "go.mod").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("k8s.io/kubernetes", "go.etcd.io/etcd/server/v3"):
            versions[parts[0]] = parts[1]
    root = Path(os.environ.get("OCL_REALAPI_CACHE") or Path.home() / ".cache/ocl-reconciler")
    return root / f"k8s-{versions['k8s.io/kubernetes']}-etcd-{versions['go.etcd.io/etcd/server/v3']}"


def binaries() -> Path:
    """The cache folder with kube-apiserver, etcd and kubectl, or skip (fail where required)."""
    bindir = cache_dir()
    missing = [b for b in ("kube-apiserver", "etcd", "kubectl") if not (bindir / b).is_file()]
    problem = ""
    if missing:
        problem = (f"realapi needs {', '.join(missing)} in {bindir}: `make realapi` builds them from Go "
                   f"modules (needs go and the module proxy)")
    elif not MCO_SRC.is_file():
        problem = f"realapi needs {MCO_SRC} (the MachineConfiguration CRD)"
    elif not BUILD_SCHEMA.is_file() or not MCO_POLICIES.is_dir():
        problem = (f"realapi needs ../shared/schemas, with the MCO's policies in mco-policies/ "
                   f"(absent: {BUILD_SCHEMA if not BUILD_SCHEMA.is_file() else MCO_POLICIES})")
    if problem:
        requirement.missing(REQUIRE, problem)
    return bindir


def mco_src_crds(names: tuple[str, ...] = MCO_SRC_CRDS) -> list[dict[str, Any]]:
    """CRDs (MCO_SRC_CRDS by default), read from the tarball (never copied into the repository)."""
    import tarfile
    with tarfile.open(MCO_SRC) as tar:
        return [yamlio.load(tar.extractfile(name).read()) for name in names]


def kustomize(path: Path, kubectl: str | None = None) -> str:
    """What `kubectl kustomize path` prints. An overlay of the checkout's kustomize/ is rendered once
    per process: those files do not change while the tests run, the tests render them hundreds of
    times (components installed and removed around most realapi tests), and a kubectl process costs
    0.15 s of CPU. Any other folder (a test's own, which it may edit) is rendered every time."""
    kubectl = kubectl or kubectl_binary() or "kubectl"
    if Path(path).resolve().is_relative_to(F.ROOT / "kustomize"):
        return _kustomize_once(kubectl, Path(path).resolve())
    return _kustomize(kubectl, Path(path))


def _kustomize(kubectl: str, path: Path) -> str:
    return subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, check=True,
                          timeout=60).stdout


_kustomize_once = functools.cache(_kustomize)


@functools.cache
def _kustomized(kubectl: str, path: Path) -> list[dict[str, Any]]:
    return [d for d in yamlio.load_all(kustomize(path, kubectl)) if d]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class APIError(Exception):
    def __init__(self, status: int, body: Any):
        super().__init__(f"{status}: {body.get('message') if isinstance(body, dict) else body}")
        self.status, self.body = status, body


def build_crd() -> dict[str, Any]:
    """A structural CRD for build.openshift.io/v1 Build from the OpenAPI-derived JSON schema:
    references inlined, descriptions dropped, status a subresource."""
    schema = json.loads(BUILD_SCHEMA.read_text())
    defs = schema["definitions"]

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(n, seen) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in seen or name.endswith(".ObjectMeta"):
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            if name.endswith(("intstr.IntOrString", "resource.Quantity")):
                return {"x-kubernetes-int-or-string": True}
            return inline(defs[name], seen + (name,))
        out = {}
        for key, value in node.items():
            if key in ("description", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key",
                       "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
                       "x-source", "$schema", "definitions", "default"):
                continue
            if key == "format" and value in ("int-or-string", "byte"):
                continue
            out[key] = inline(value, seen)
        if "properties" in out and "type" not in out:
            out["type"] = "object"
        return out

    root = inline(schema, ())
    root["properties"]["metadata"] = {"type": "object"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "builds.build.openshift.io"},
            "spec": {"group": "build.openshift.io", "scope": "Namespaced",
                     "names": {"kind": "Build", "listKind": "BuildList", "plural": "builds",
                               "singular": "build"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": root}}]}}


class RealAPI:
    """etcd + kube-apiserver in a temporary folder; `stop()` leaves no process behind."""

    def __init__(self, root: Path, bindir: Path, apiserver_args: tuple[str, ...] = ()):
        self.root, self.bindir = root, bindir
        self.apiserver_args = apiserver_args    # more kube-apiserver flags (a module's own server)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.audit_log = root / "audit.log"
        self.kubectl_path = str(bindir / "kubectl")
        self.served: set[str] = set()      # UNSERVED kinds a module serves for now (serving())
        self._conns = threading.local()     # one kept-alive connection per thread (_send)
        self._context: ssl.SSLContext | None = None

    # lifecycle --------------------------------------------------------------------------------
    def start(self) -> RealAPI:
        started = time.monotonic()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._wait_ready(started + 60)
            self._bootstrap()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")    # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))
        log.close()

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            str(self.bindir / "etcd"), "--name", "ocl-test", "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"ocl-test=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "error"])

    def _start_apiserver(self) -> None:
        certs = self.root / "certs"
        certs.mkdir()
        key = certs / "sa.key"
        # a P-256 key (ES256 tokens): an RSA key costs openssl about 0.2 s of CPU to make
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)],
                       check=True, capture_output=True)
        subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(certs / "sa.pub")],
                       check=True, capture_output=True)
        (self.root / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n'
                                              f'{HARNESS_TOKEN},{HARNESS},{HARNESS},"system:masters"\n')
        (self.root / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self._spawn("kube-apiserver", [
            str(self.bindir / "kube-apiserver"),
            "--etcd-servers", self.etcd_url, "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--cert-dir", str(certs), "--token-auth-file", str(self.root / "tokens.csv"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(certs / "sa.pub"),
            "--service-account-signing-key-file", str(key),
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--authorization-mode", "RBAC", "--enable-admission-plugins", ADMISSION,
            "--audit-policy-file", str(self.root / "audit-policy.yaml"),
            "--audit-log-path", str(self.audit_log), "--audit-log-mode", "blocking",
            "--enable-priority-and-fairness=false", "--allow-privileged=true",
            "--etcd-compaction-interval", "1s",        # lets a test expire a continue token
            "--feature-gates", "ListFromCacheSnapshot=false",   # ...as releases before 1.34 do
            "-v", "0", *self.apiserver_args])

    def _wait_storage(self, deadline: float) -> None:
        for kind in set(KINDS) - UNSERVED:      # a new CRD's storage answers 429 "(re)initializing" at first
            while self.request("GET", self.path(kind, F.NS if KINDS[kind][2] else ""),
                               ok=(429,))[0] == 429:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{kind} storage is not ready")
                time.sleep(0.1)

    def restart_apiserver(self) -> float:
        """The kube-apiserver stopped (SIGTERM, as an upgrade's rollout does; killed if it has not
        ended in 5 s: it waits up to 30 s for its open watches otherwise) and started again with
        the same flags, certificates and keys, over the same etcd; the seconds it was away."""
        (proc,) = [p for p in self.procs if Path(p.args[0]).name == "kube-apiserver"]
        stopped = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.remove(proc)
        self._conns = threading.local()
        self._spawn("kube-apiserver", list(proc.args))
        self._wait_ready(time.monotonic() + 60)
        self._wait_storage(time.monotonic() + 30)
        # until the OS-stream policy finds its param's kind again (a CRD's, in the server's REST
        # mapper, which it refreshes on its own time), a restarted server refuses every pool write
        # with "failed to find resource referenced by paramKind", whoever writes: waited for here,
        # so that the tests see what a client of ours does, not what the MCO's policy does
        if self.list("OSImageStream"):
            self.wait_admission(self.probe_pool(F.pool("probe-restarted")), "", seconds=120)
        return time.monotonic() - stopped

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context(cafile=str(self.root / "certs/apiserver.crt"))
        return self._context

    def _wait_ready(self, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}: {self.tail()}")
            if (self.root / "certs/apiserver.crt").exists():
                try:
                    if self.request("GET", "/readyz")[0] == 200:
                        return
                except (OSError, APIError) as err:
                    last = str(err)
            time.sleep(0.2)
        raise RuntimeError(f"kube-apiserver not ready within 60 s ({last}): {self.tail()}")

    def compact(self) -> int:
        """etcd compacted to its current revision (etcd's own v3 API, as the apiserver's compactor does
        every second): a watch served from etcd from an older resourceVersion is then 410 Gone."""
        def etcd(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(self.etcd_url + path, json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as resp:
                return json.load(resp)
        revision = int(etcd("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def tail(self) -> str:
        out = []
        for name in ("etcd", "kube-apiserver"):
            path = self.root / f"{name}.log"
            if path.exists():
                out.append(f"--- {name}: " + " | ".join(path.read_text(errors="replace").splitlines()[-8:]))
        return "\n".join(out)

    def _bootstrap(self) -> None:
        for ns in NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.monotonic() + 30
        self.add_crds([yamlio.load(p.read_text()) for p in CRDS] + [build_crd()] + mco_src_crds(), deadline)
        self._wait_storage(deadline)
        for ns in NAMESPACES:       # kube-controller-manager would make these; it does not run here
            self.create({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": "default", "namespace": ns}})

    def add_crds(self, crds: list[dict[str, Any]], deadline: float | None = None) -> None:
        """Create CRDs and wait until each is Established and its resource served (a new CRD's
        storage answers 429 "(re)initializing" at first)."""
        deadline = deadline or time.monotonic() + 30
        for crd in crds:
            self.request("POST", CRD_PATH, crd)
        for crd in crds:
            path = f"{CRD_PATH}/{crd['metadata']['name']}"
            while True:
                conditions = (self.request("GET", path)[1].get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {crd['metadata']['name']} not established: {conditions}")
                time.sleep(0.1)
            spec = crd["spec"]
            served = next(v["name"] for v in spec["versions"] if v.get("served"))
            collection = f"/apis/{spec['group']}/{served}/{spec['names']['plural']}"
            while self.request("GET", collection, ok=(404, 429))[0] != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{collection} is not served")
                time.sleep(0.1)

    def remove_crds(self, names: list[str]) -> None:
        """Delete CRDs (their objects go with them) and wait until they are gone."""
        deadline = time.monotonic() + 60
        for name in names:
            self.request("DELETE", f"{CRD_PATH}/{name}", ok=(404,))
        for name in names:
            while self.request("GET", f"{CRD_PATH}/{name}", ok=(404,))[0] != 404:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} is not deleted")
                time.sleep(0.1)

    @contextlib.contextmanager
    def serving(self, crds: list[dict[str, Any]]) -> Iterator[RealAPI]:
        """Serve CRDs for a while (a module's own, such as an UNSERVED kind's: reset() clears its
        objects meanwhile), then remove those it added (their objects go with them). A CRD that an
        earlier test left served (the MCO's controllers install theirs once a server) is used as it
        is and stays: the caller deletes the objects it made. Either way the server is as before,
        whichever test ran first (issue 57: a POST of a served CRD answers 409)."""
        new = [crd for crd in crds
               if self.request("GET", f"{CRD_PATH}/{crd['metadata']['name']}", ok=(404,))[0] == 404]
        self.add_crds(new)
        kinds = {crd["spec"]["names"]["kind"] for crd in new}
        self.served |= kinds
        try:
            yield self
        finally:
            self.served -= kinds
            self.remove_crds([crd["metadata"]["name"] for crd in new])

    def install_product(self) -> None:
        """What an administrator deploys (`kubectl kustomize kustomize/base`: ServiceAccounts, Roles,
        bindings, the CronJob) and the imitation of OpenShift's admission (tests/tools/realapi/)."""
        kubeconfig = self.kubeconfig(self.root / "admin.kubeconfig")
        rendered = kustomize(F.ROOT / "kustomize/base", self.kubectl_path)
        for source in (rendered, (HERE / "openshift-admission.yaml").read_text()):
            subprocess.run([self.kubectl_path, "--kubeconfig", kubeconfig, "create", "-f", "-"],
                           input=source, capture_output=True, text=True, check=True, timeout=60)
        # kustomize/base made our namespace; kube-controller-manager would give it its `default`
        # ServiceAccount and root CA ConfigMap; it does not run here
        self.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": F.NS}})
        # the policies are enforced once the server has compiled them: wait for a refusal
        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scc-probe", "namespace": F.NS},
                 "spec": {"containers": [{"name": "c", "image": "busybox",
                                          "securityContext": {"runAsUser": 1000}}]}}
        deadline = time.monotonic() + 20
        while True:
            status, body = self.request("POST", self.path("Pod", F.NS) + "?dryRun=All", probe,
                                        as_user=RECONCILER, ok=(201, 403))
            if status == 403 and "security context constraint" in str(body.get("message")):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the SCC policy is not enforced: {status} {body}")
            time.sleep(0.2)

    # the MCO's admission policies for pools ------------------------------------------------------
    def install_mco_policies(self) -> None:
        """The MCO's two policies as it deploys them (../shared/schemas/mco-policies/, unchanged) and
        the OS-stream policy's param, then wait until the server enforces both."""
        self.request("POST", self.path("OSImageStream"), BARE_STREAMS)
        for path in sorted(MCO_POLICIES.glob("*.yaml")):
            doc = yamlio.load(path.read_text())
            self.request("POST", ROLLOUT_PATHS[doc["kind"]], doc)
        old = self.probe_pool(F.pool("probe-old"))
        old["spec"]["machineConfigSelector"] = {"matchLabels": {f"{F.MCO}/role": "probe-old"}}
        unlisted = self.probe_pool(F.pool("probe-stream"))
        unlisted["spec"]["osImageStream"] = {"name": "probe-unlisted"}
        self.wait_admission(old, f"ValidatingAdmissionPolicy '{SELECTOR_POLICY}'")
        self.wait_admission(unlisted, f"ValidatingAdmissionPolicy '{STREAM_POLICY}'")
        self.wait_admission(self.probe_pool(F.pool("probe-new")), "")

    @staticmethod
    def probe_pool(pool: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(pool)
        body.pop("status", None)
        for key in ("uid", "resourceVersion"):
            body["metadata"].pop(key, None)
        return body

    def wait_admission(self, pool: dict[str, Any], denied_by: str, seconds: float = 20) -> None:
        """Poll a dry-run create of `pool` as the admin until it is denied with `denied_by` in the
        message ("": until it is admitted): the server applies policies and params asynchronously."""
        deadline = time.monotonic() + seconds
        while True:
            status, body = self.request("POST", self.path("MachineConfigPool") + "?dryRun=All", pool,
                                        ok=(403, 422))
            message = str(body.get("message")) if isinstance(body, dict) else str(body)
            if (status == 201 and not denied_by) or (status >= 400 and denied_by and denied_by in message):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"pool {pool['metadata']['name']}: want {denied_by or 'admitted'}, got "
                                   f"{status} {message}")
            time.sleep(0.1)

    def write_streams(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The singleton is the stream policy's param and always there: a scenario's replaces it
        (status first cleared, so that the CRD's rule on spec.defaultStream holds), and the policy
        admits a pool naming each listed stream before this returns."""
        path = self.path("OSImageStream", "", "cluster")
        live = self.request("GET", path)[1]
        live.pop("status", None)
        live = self.request("PUT", path + "/status", live)[1]
        live = self.request("PUT", path, dict(live, spec=obj["spec"]))[1]
        if obj.get("status"):
            live = self.write_status(dict(live, status=obj["status"]))
        for stream in (obj.get("status") or {}).get("availableStreams") or []:
            probe = self.probe_pool(F.pool("probe-stream"))
            probe["spec"]["osImageStream"] = {"name": stream["name"]}
            self.wait_admission(probe, "")
        return live

    # the rollout component (kustomize/components/rollout) --------------------------------------
    def added_objects(self, overlay: Path, without: Path) -> list[dict[str, Any]]:
        """The objects `overlay` renders and `without` does not: what a component adds."""
        def render(path: Path) -> list[dict[str, Any]]:
            return copy.deepcopy(_kustomized(self.kubectl_path, path))

        def key(d: dict[str, Any]) -> tuple[str, str, str]:
            return d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]
        excluded = {key(d) for d in render(without)}
        added = [d for d in render(overlay) if key(d) not in excluded]
        unknown = [key(d) for d in added if key(d) != ("ConfigMap", ROLLOUT_PARAMS_NS, ROLLOUT_PARAMS) and
                   (d["kind"] not in ROLLOUT_PATHS or d["metadata"].get("namespace"))]
        if unknown or not added:
            raise RuntimeError(f"{overlay.name} adds {[key(d) for d in added]} to {without.name}; the harness "
                               f"knows only cluster-scoped {sorted(ROLLOUT_PATHS)}")
        return added

    def rollout_objects(self) -> list[dict[str, Any]]:
        """The objects kustomize/components/rollout adds to overlays/openshift, as rendered."""
        return self.added_objects(ROLLOUT_OVERLAY, ROLLOUT_WITHOUT)

    def _put(self, objs: list[dict[str, Any]]) -> None:
        """Create each object, or replace the one already there with it."""
        for obj in objs:
            path = object_path(obj)
            if self.request("POST", path.rsplit("/", 1)[0], obj, ok=(409,))[0] == 409:
                live = self.request("GET", path)[1]
                self.request("PUT", path, dict(obj, metadata=dict(
                    obj["metadata"], resourceVersion=live["metadata"]["resourceVersion"])))

    def install_rollout(self, repository: str = F.REPO, pools: tuple[str, ...] = ROLLOUT_POOLS) -> None:
        """Install the rollout component as an administrator would (idempotent: an object already
        there is replaced by the rendered one), its parameter edited to `repository` and `pools`,
        then wait until its policy is enforced and its parameter read. Not part of
        install_product: tests/realapi/test_realapi_rbac.py proves base's least privilege without it."""
        self._put(PARAM_KEEPER)
        self._put([rollout_params(repository, pools) if o["kind"] == "ConfigMap" else o
                   for o in self.rollout_objects()])
        self.wait_rollout("enforced", lambda status, message: status == 403 and
                           f"ValidatingAdmissionPolicy '{ROLLOUT_POLICY}'" in message)
        self.wait_rollout_params(repository, pools)

    def write_rollout_params(self, repository: str, pools: tuple[str, ...] | list[str]) -> None:
        """Create or replace the policy's parameter (as an administrator), then wait until the
        server admits our write for its first pool: it reads params asynchronously."""
        self._put([rollout_params(repository, pools)])
        self.wait_rollout_params(repository, pools)

    def wait_rollout_params(self, repository: str, pools: tuple[str, ...] | list[str]) -> None:
        if not pools:
            return
        pool = pools[0]
        probe = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                 "metadata": {"name": f"ocl-osimageurl-{pool}", "labels": {
                     "machineconfiguration.openshift.io/role": pool, "ocl-reconciler.io/pool": pool,
                     "app.kubernetes.io/managed-by": "ocl-reconciler"}},
                 "spec": {"osImageURL": repository + "@sha256:" + "0" * 64}}
        # admitted: created (dry run), or AlreadyExists (admission runs before storage)
        self._poll_as_reconciler(f"the rollout parameter is not {repository} {list(pools)}",
                                 lambda status, message: status == 201 or "already exists" in message,
                                 "POST", self.path("MachineConfig") + "?dryRun=All", probe, ok=(201, 403, 409, 422))

    def _delete_bound(self, objs: list[dict[str, Any]], unbound: Any) -> None:
        """Delete a component's objects, its ValidatingAdmissionPolicyBinding first; `unbound()` waits
        until the server no longer enforces it before the rest go."""
        for index, obj in enumerate(sorted(objs, key=lambda o: o["kind"] != "ValidatingAdmissionPolicyBinding")):
            self.request("DELETE", object_path(obj), ok=(404,))
            if index == 0:
                unbound()

    def remove_rollout(self) -> None:
        """Delete the rollout component's objects (idempotent). The binding goes first, and is
        seen gone (the reconciler's bad write passes admission) before the rest, so that a later
        install_rollout() can only ever see its own policy; then RBAC refuses the reconciler's
        MachineConfig writes again."""
        self._delete_bound(self.rollout_objects(), lambda: self.wait_rollout(
            "unbound", lambda status, message: status == 201 or 'cannot create resource "machineconfigs"' in message))
        self.wait_rollout("removed", lambda status, message: status == 403 and
                           'cannot create resource "machineconfigs"' in message)

    def wait_rollout(self, what: str, done: Any) -> None:
        """Poll until `done(status, message)` holds for the reconciler's dry-run create of a
        MachineConfig of its own that also sets kernelArguments (the policy refuses it; RBAC
        without the component refuses any create): the server applies RBAC and policy changes
        asynchronously."""
        probe = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                 "metadata": {"name": "ocl-osimageurl-probe", "labels": {
                     "machineconfiguration.openshift.io/role": "probe",
                     "app.kubernetes.io/managed-by": "ocl-reconciler"}},
                 "spec": {"osImageURL": F.REPO + "@sha256:" + "0" * 64, "kernelArguments": ["probe"]}}
        self._poll_as_reconciler(f"the rollout component is not {what}", done, "POST",
                                 self.path("MachineConfig") + "?dryRun=All", probe)

    def _poll_as_reconciler(self, failure: str, done: Any, method: str, path: str, body: Any,
                            content_type: str = "application/json",
                            ok: tuple[int, ...] = (201, 403, 422)) -> None:
        """Send one request as the reconciler (by impersonation) every 0.1 s until
        `done(status, message)` holds; RuntimeError(failure) after 20 s."""
        deadline = time.monotonic() + 20
        while True:
            status, answer = self.request(method, path, body, content_type, as_user=RECONCILER, ok=ok)
            message = str(answer.get("message")) if isinstance(answer, dict) else str(answer)
            if done(status, message):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{failure}: {status} {message}")
            time.sleep(0.1)

    # the pool policy (kustomize/components/pool-policy) ------------------------------------------
    def pool_policy_objects(self) -> list[dict[str, Any]]:
        """The policy on pools and its binding, as overlays/openshift renders them."""
        return self._component(POOL_POLICY_OVERLAY, POOL_POLICY_WITHOUT, "pool-policy")

    def _component(self, overlay: Path, without: Path, component: str) -> list[dict[str, Any]]:
        """What `overlay` adds to `without` that carries the label app.kubernetes.io/component=`component`."""
        objs = [o for o in self.added_objects(overlay, without)
                if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component]
        if not objs:
            raise RuntimeError(f"{overlay.name} adds nothing of components/{component}")
        return objs

    def install_pool_policy(self) -> None:
        """Create (or replace) the pool policy and its binding, then wait until the server enforces
        it. Not part of install_product (kustomize/base): the other realapi modules run without it."""
        self._put(self.pool_policy_objects())
        self.wait_pool_policy("enforced", lambda status, message: status == 403 and
                              f"ValidatingAdmissionPolicy '{POOL_POLICY}'" in message)

    def remove_pool_policy(self) -> None:
        """Delete the binding, wait until the reconciler's label patch passes again, then the policy."""
        self._delete_bound(self.pool_policy_objects(),
                           lambda: self.wait_pool_policy("unbound", lambda status, message: status == 200))

    def wait_pool_policy(self, what: str, done: Any) -> None:
        """Poll until `done(status, message)` holds for the reconciler's dry-run patch adding a label
        to a probe pool (made here as the admin, deleted after): the policy refuses it, RBAC allows it."""
        probe = self.probe_pool(F.pool("probe-pools"))
        path = self.path("MachineConfigPool", "", "probe-pools")
        self.request("POST", self.path("MachineConfigPool"), probe, ok=(409,))
        patch = [{"op": "add", "path": "/metadata/labels/probe", "value": "x"}]
        try:
            self._poll_as_reconciler(f"the pool policy is not {what}", done, "PATCH", path + "?dryRun=All",
                                     patch, "application/json-patch+json")
        finally:
            self.request("DELETE", path, ok=(404,))

    # the namespace policy (kustomize/components/namespace-policy) --------------------------------
    def namespace_policy_objects(self) -> list[dict[str, Any]]:
        """The policy on our namespace's Secrets and Pods and its binding, as overlays/openshift renders them."""
        return self._component(POOL_POLICY_OVERLAY, POOL_POLICY_WITHOUT, "namespace-policy")

    def install_namespace_policy(self) -> None:
        """Create (or replace) the namespace policy and its binding, then wait until it is enforced."""
        self._put(self.namespace_policy_objects())
        self.wait_namespace_policy("enforced", lambda status, message: status == 403 and
                                   f"ValidatingAdmissionPolicy '{NAMESPACE_POLICY}'" in message)

    def remove_namespace_policy(self) -> None:
        """Delete the binding, wait until the probe passes again, then the policy."""
        self._delete_bound(self.namespace_policy_objects(),
                           lambda: self.wait_namespace_policy("unbound", lambda status, message: status == 201))

    def wait_namespace_policy(self, what: str, done: Any) -> None:
        """Poll until `done(status, message)` holds for the reconciler's dry-run create of a
        service-account-token Secret: the policy refuses it, RBAC allows it."""
        probe = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                 "metadata": {"name": "probe-namespace-policy", "namespace": F.NS,
                              "annotations": {"kubernetes.io/service-account.name": "ocl-reconciler"}}}
        self._poll_as_reconciler(f"the namespace policy is not {what}", done, "POST",
                                 self.path("Secret", F.NS) + "?dryRun=All", probe)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=3)         # a graceful kube-apiserver shutdown takes longer
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs = []

    # REST as the admin ------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                token: str = HARNESS_TOKEN, ok: tuple[int, ...] = (), as_user: str = "") -> tuple[int, Any]:
        """One request as the tests' admin (or as `as_user`, by impersonation); (status, parsed body)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type,
                   "Accept": "application/json"}
        if as_user:
            headers["Impersonate-User"] = as_user
        status, raw = self._send(method, path, data, headers)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if status >= 300 and status not in ok:
            raise APIError(status, parsed)
        return status, parsed

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        """Over this thread's kept-alive connection: a TLS handshake per request cost the server
        four times the CPU of the request itself (bench: 8 ms against 2.5 ms), and the tests poll.
        A connection the server closed while idle (kube-apiserver closes one idle for 90 s: its
        http.Server's IdleTimeout) is opened again once, as urllib3 does; over TLS that close can
        show as an SSL EOF on the next write."""
        for attempt in (1, 2):
            conn = getattr(self._conns, "conn", None)
            fresh = conn is None
            if fresh:
                conn = self._conns.conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self._ssl(), timeout=30)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.read()
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError,
                    ConnectionResetError, ssl.SSLEOFError):
                conn.close()
                self._conns.conn = None
                if fresh or attempt == 2:
                    raise
            except BaseException:
                conn.close()
                self._conns.conn = None
                raise
        raise AssertionError("unreachable")

    def watch(self, path: str, stop: threading.Event) -> Iterator[dict[str, Any]]:
        """The events of a WATCH on `path` (a collection, with or without a query) as the admin, from
        its LIST's resourceVersion, until `stop`: what an informer-driven controller reacts to, within
        milliseconds of the write instead of a poll's interval. Each watch lasts a second, so `stop`
        is seen within one; the next goes over the same connection. An ERROR event (410 Gone) is
        passed on, then the watch lists again."""
        sep = "&" if "?" in path else "?"
        version = self.request("GET", path)[1]["metadata"]["resourceVersion"]
        headers = {"Authorization": f"Bearer {HARNESS_TOKEN}", "Accept": "application/json"}
        conn = None
        try:
            while not stop.is_set():
                conn = conn or http.client.HTTPSConnection("127.0.0.1", self.port, context=self._ssl(), timeout=30)
                conn.request("GET", f"{path}{sep}watch=1&timeoutSeconds=1&resourceVersion={version}",
                             headers=headers)
                resp = conn.getresponse()
                if resp.status != 200:
                    raise APIError(resp.status, resp.read().decode(errors="replace"))
                while line := resp.readline():
                    event = json.loads(line)
                    if event["type"] == "ERROR":        # e.g. 410 Gone: list again, as an informer does
                        conn.close()
                        conn, version = None, self.request("GET", path)[1]["metadata"]["resourceVersion"]
                        yield event
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    yield event
        finally:
            if conn is not None:
                conn.close()

    @staticmethod
    def path(kind: str, namespace: str = "", name: str = "") -> str:
        prefix, plural, namespaced = KINDS[kind]
        base = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{prefix}/{plural}"
        return f"{base}/{urllib.parse.quote(name)}" if name else base

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        status, obj = self.request("GET", self.path(kind, namespace, name), ok=(404,))
        return obj if status == 200 else None

    def list(self, kind: str, namespace: str = "", selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        _, page = self.request("GET", self.path(kind, namespace) + query)
        api = page.get("apiVersion", "v1")
        return [dict(o, apiVersion=api, kind=kind) for o in page.get("items") or []]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create `obj` (server fields dropped) and, where the kind has one, write its status."""
        body = copy.deepcopy(obj)
        md = body.setdefault("metadata", {})
        for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
            md.pop(key, None)
        ns = md.get("namespace", "")
        if (body["kind"], md.get("name")) == ("OSImageStream", "cluster"):
            return self.write_streams(body)
        _, made = self.request("POST", self.path(body["kind"], ns), body)
        if body["kind"] in STATUS_KINDS and body.get("status"):
            for attempt in range(5):
                try:
                    return self.write_status(dict(made, status=body["status"]))
                except APIError as err:
                    # a controller wrote it first (a Node's taints: the node lifecycle controller)
                    if err.status != 409 or attempt == 4:
                        raise
                    made = self.get(body["kind"], ns, md["name"])
        return made

    def write_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        md = obj["metadata"]
        _, made = self.request("PUT", self.path(obj["kind"], md.get("namespace", ""), md["name"]) + "/status",
                               obj)
        return made

    def load(self, items: list[dict[str, Any]]) -> None:
        """Create them, the OSImageStream first: the stream policy admits a pool only by it."""
        for obj in sorted(items, key=lambda o: o.get("kind") != "OSImageStream"):
            self.create(obj)

    def items(self) -> list[dict[str, Any]]:
        """Everything a scenario looks at, as a snapshot would hold it."""
        out = []
        for kind in ITEM_KINDS:
            for ns in SCENARIO_NAMESPACES:
                out += [o for o in self.list(kind, ns) if (kind, o["metadata"]["name"]) not in KEEP]
        for kind in ITEM_CLUSTER_KINDS:
            out += self.list(kind)
        return out

    def ours(self) -> list[dict[str, Any]]:
        """What items() holds that is labelled ours (not the Events and Leases, records rather than
        objects we own), in the same order: one LIST by label a kind across namespaces, where
        items() makes 32 (owned() is called in every loop of the realapi scenarios)."""
        kinds = [*ITEM_KINDS, *ITEM_CLUSTER_KINDS]
        out = [o for kind in kinds if kind not in ("Event", "Lease")
               for o in self.list(kind, selector=objects.selector_string(naming.SELECTOR))
               if (kind, o["metadata"]["name"]) not in KEEP
               and o["metadata"].get("namespace", "") in ("", *SCENARIO_NAMESPACES)]
        return sorted(out, key=lambda o: (kinds.index(o["kind"]),
                                          SCENARIO_NAMESPACES.index(o["metadata"].get("namespace") or F.NS)))

    def reset(self) -> None:
        """Back to the bootstrapped state: every object a scenario may have made is deleted."""
        for kind, (_, _, namespaced) in KINDS.items():
            # the installed product stays; a kind not served has nothing to clear
            if kind in ("Namespace", "ServiceAccount") or kind in UNSERVED - self.served:
                continue
            for ns in SCENARIO_NAMESPACES if namespaced else ("",):
                for obj in self.list(kind, ns):
                    name = obj["metadata"]["name"]
                    if (kind, name) in KEEP:
                        continue
                    if obj["metadata"].get("finalizers"):       # a volume's pvc-protection: no controller here
                        self.release(kind, ns, name)
                    self.request("DELETE", self.path(kind, ns, name), {"gracePeriodSeconds": 0},
                                 ok=(404,))
        if (self.get("OSImageStream", "", "cluster") or {}).get("status"):
            self.write_streams(BARE_STREAMS)

    def release(self, kind: str, namespace: str, name: str) -> None:
        """What a controller does once it lets go: the object's finalizers removed (a deleted one
        is then gone)."""
        self.request("PATCH", self.path(kind, namespace, name), {"metadata": {"finalizers": None}},
                     content_type="application/merge-patch+json", ok=(404,))

    # clients ----------------------------------------------------------------------------------
    def kubeconfig(self, path: Path, token: str = ADMIN_TOKEN, user: str = "admin") -> str:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "real",
            "clusters": [{"name": "real", "cluster": {
                "server": self.url, "certificate-authority": str(self.root / "certs/apiserver.crt")}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}]}))
        return str(path)

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A real bound token for the ServiceAccount, issued by the TokenRequest API."""
        _, resp = self.request(
            "POST", self.path("ServiceAccount", namespace, name) + "/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": seconds}})
        return resp["status"]["token"]

    def kubectl(self, *args: str, kubeconfig: str, check: bool = True,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.kubectl_path, "--kubeconfig", kubeconfig, *args], capture_output=True,
                              text=True, check=check, timeout=60, input=input)

    # audit ------------------------------------------------------------------------------------
    def audit_mark(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audit(self, since: int, user: str | None = None,
              stages: tuple[str, ...] = ("ResponseComplete",)) -> list[dict[str, Any]]:
        """Audit events after offset `since`, once a marker request made now has been logged (a watch
        still open has only its ResponseStarted event)."""
        marker = f"ocl-audit-marker-{time.monotonic_ns()}"
        self.request("GET", f"/api/v1/namespaces/{marker}", ok=(404,))
        deadline = time.monotonic() + 10
        while True:
            with open(self.audit_log, "rb") as fh:
                fh.seek(since)
                events = [json.loads(line) for line in fh.read().splitlines() if line.strip()]
            if any(marker in e.get("requestURI", "") and e.get("stage") == "ResponseComplete" for e in events):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the audit marker never reached the audit log")
            time.sleep(0.05)
        return [e for e in events if e.get("stage") in stages
                and (user is None or e.get("user", {}).get("username") == user)]


class Real:
    """A scenario on the real server: seed objects as the admin, run `ocl-reconcile` as its
    ServiceAccount, play the kubelet or build controller through the status subresource."""

    def __init__(self, api: RealAPI, tmp: Path, capsys: pytest.CaptureFixture[str]):
        self.api, self.tmp, self.capsys = api, tmp, capsys
        self.kubeconfig = api.kubeconfig(tmp / "sa.kubeconfig", api.sa_token, "ocl-reconciler")
        self.admin = api.kubeconfig(tmp / "admin.kubeconfig")
        self.stderr: list[str] = []          # every run's stderr, for scenarios that look later

    def seed(self, items: list[dict[str, Any]]) -> None:
        self.api.load(items)

    def cli(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main([*args, "--kubeconfig", self.kubeconfig, "--timeout", "30"])
        out, err = self.capsys.readouterr()
        self.stderr.append(err)
        return code, out, err

    def run(self, *extra: str) -> tuple[int, str]:
        code, _, err = self.cli("run", *extra)
        return code, err

    def pool(self, name: str = "worker") -> dict[str, Any]:
        return self.api.get("MachineConfigPool", "", name)

    def ann(self, name: str = "worker") -> dict[str, str]:
        return self.pool(name)["metadata"].get("annotations") or {}

    def owned(self, pool: str = "worker") -> list[dict[str, Any]]:
        return F.owned(self.api.ours(), pool)

    def build_object(self, pool: str = "worker") -> dict[str, Any]:
        found = [o for o in self.owned(pool) if o["kind"] in ("Pod", "Build")]
        assert len(found) == 1, [o["metadata"]["name"] for o in found]
        return found[0]

    def finish(self, phase: str, pool: str = "worker", **kw: Any) -> dict[str, Any]:
        """Write the status a kubelet (or OpenShift's build controller) would."""
        import kubelet  # examples/kubelet.py, on the path by conftest
        obj = self.build_object(pool)
        kubelet.set_phase(obj, phase, **kw)
        return self.api.write_status(obj)

    def new_rendered_config(self, rendered: str, pool: str = "worker") -> None:
        """The MCO rendered a new MachineConfig for the pool."""
        self.api.create(F.machineconfig(rendered))
        self.switch_config(rendered, pool)

    def switch_config(self, rendered: str, pool: str = "worker") -> None:
        """The pool's current rendered config becomes `rendered` (one that exists: a rollback)."""
        obj = self.pool(pool)
        obj["spec"]["configuration"]["name"] = rendered
        self.api.request("PUT", self.api.path("MachineConfigPool", "", pool), obj)

    def recreate_before_our_first_delete(self, kind: str, patcher: pytest.MonkeyPatch,
                                         change: Any = None) -> list[int]:
        """Right before our first DELETE of `kind`, someone deletes and recreates that object (same
        content, or what `change` makes of it; a new uid), so our uid precondition fails. Returns a
        list that fills when it did."""
        def recreate(k: str, namespace: str, name: str) -> None:
            again = self.api.get(k, namespace, name)
            self.api.request("DELETE", self.api.path(k, namespace, name))
            self.api.create(change(again) if change else again)
        return self.before_our_first_delete(kind, patcher, recreate)

    def before_our_first_delete(self, kind: str, patcher: pytest.MonkeyPatch, meddle: Any) -> list[int]:
        """Right before our first DELETE of `kind`, `meddle(kind, namespace, name)` runs as the
        admin. Returns a list that fills when it did."""
        from reconcile.cluster import live
        original, raced = live.LiveCluster.delete, []

        def delete(cluster: Any, k: str, namespace: str, name: str, uid: str | None = None,
                   resource_version: str | None = None) -> None:
            if k == kind and not raced:
                raced.append(1)
                meddle(k, namespace, name)
            return original(cluster, k, namespace, name, uid, resource_version)
        patcher.setattr(live.LiveCluster, "delete", delete)
        return raced

    def events(self, pool: str = "worker") -> list[dict[str, Any]]:
        return [e for e in self.api.list("Event", events.NAMESPACE)
                if e["involvedObject"]["name"] == pool]



def start_installed(root: Path, apiserver_args: tuple[str, ...] = ()) -> RealAPI:
    """A started server with kustomize/base and the MCO's pool policies installed, and a token of
    our ServiceAccount (`sa_token`): the suite's session server, or a module's own (with more
    kube-apiserver flags)."""
    api = RealAPI(root, binaries(), apiserver_args).start()
    try:
        api.install_product()
        api.install_mco_policies()
        api.sa_token = api.service_account_token(F.NS, "ocl-reconciler")
    except BaseException:
        api.stop()
        raise
    return api


def kubectl_binary() -> str | None:
    path = cache_dir() / "kubectl"
    return str(path) if path.is_file() else shutil.which("kubectl")
