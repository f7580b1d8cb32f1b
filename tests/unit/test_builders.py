"""The two image builders behind one interface, and the build inputs both receive."""

from __future__ import annotations

import base64
import json

import pytest

from reconcile.contract import annotations as A
from reconcile.core import desired
from reconcile.imagebuild import auth, builders, buildinputs, settings
from tests.support import factory as F

BOTH = sorted(F.BUILD_KINDS)


def _settings(builder_type: str) -> settings.Settings:
    return settings.read(F.NS, {"on-cluster-build-config": F.build_config(imageBuilderType=builder_type),
                                "machine-config-osimageurl": F.osimageurl()})


def generate(builder_type: str, material: desired.Material | None = None):
    s = _settings(builder_type)
    pool = F.pool("worker")
    inp = desired.inputs(s, pool, F.content(pool))
    return desired.objects(s, pool, inp, builders.for_type(builder_type), F.machineconfig(inp.rendered_config),
                           material)


@pytest.mark.parametrize("phase, status, state, digest, message", [
    ("Pod", {}, A.PENDING, None, ""),
    ("Pod", {"phase": "Pending"}, A.PENDING, None, ""),
    ("Pod", {"phase": "Running"}, A.BUILDING, None, ""),
    ("Pod", {"phase": "Succeeded", "containerStatuses": [{"name": "image-build", "state": {"terminated": {
        "exitCode": 0, "message": "sha256:" + "b" * 64 + "\n"}}}]}, A.SUCCEEDED, "sha256:" + "b" * 64, ""),
    ("Pod", {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."},
     A.FAILED, None, "build Pod/ns/b failed: Evicted: The node was low on memory."),
    ("Build", {}, A.PENDING, None, ""),
    ("Build", {"phase": "New"}, A.PENDING, None, ""),
    ("Build", {"phase": "Pending"}, A.PENDING, None, ""),
    ("Build", {"phase": "Running"}, A.BUILDING, None, ""),
    ("Build", {"phase": "Complete", "output": {"to": {"imageDigest": "sha256:" + "c" * 64}}},
     A.SUCCEEDED, "sha256:" + "c" * 64, ""),
    ("Build", {"phase": "Complete"}, A.FAILED, None,
     "build Build/ns/b completed without a sha256 digest in status.output.to.imageDigest"),
    ("Build", {"phase": "Failed", "reason": "DockerBuildFailed", "message": "Docker build strategy has failed.",
               "logSnippet": "STEP 3\nerror: exit status 1\n"}, A.FAILED, None,
     "build Build/ns/b failed: DockerBuildFailed: Docker build strategy has failed: error: exit status 1"),
    ("Build", {"phase": "Error", "reason": "FetchSourceFailed"}, A.FAILED, None, "build Build/ns/b error: FetchSourceFailed"),
    ("Build", {"phase": "Cancelled"}, A.FAILED, None, "build Build/ns/b cancelled: no reason given"),
])
def test_status_mapping(phase, status, state, digest, message):
    kind = phase
    builder = builders.pod if kind == "Pod" else builders.build
    got = builder.read_status({"kind": kind, "metadata": {"name": "b", "namespace": "ns"}, "status": status})
    assert (got.state, got.digest, got.message) == (state, digest, message)


def test_build_object_shape():
    build = generate("openshift-image-builder")[-1]
    spec = build["spec"]
    assert build["kind"] == "Build" and build["apiVersion"] == "build.openshift.io/v1"
    assert spec["source"]["type"] == "Dockerfile"
    assert spec["source"]["configMaps"] == [
        {"configMap": {"name": build["metadata"]["name"].replace("ocl-build", "ocl-mc")},
         "destinationDir": "machineconfig"},
        {"configMap": {"name": build["metadata"]["name"].replace("ocl-build", "ocl-dockerfile")}}]
    docker = spec["strategy"]["dockerStrategy"]
    assert spec["strategy"]["type"] == "Docker" and docker["imageOptimizationPolicy"] == "SkipLayers"
    assert docker["pullSecret"] == {"name": "pull-secret"}
    assert spec["output"]["to"] == {"kind": "DockerImage", "name": f"{F.REPO}:rendered-worker-1"}
    assert spec["output"]["pushSecret"] == {"name": "push-secret"}
    # imageLabels never reach the image (openshift/builder source.go, common.go: they go into the
    # builder's inline Dockerfile, which ours replaces): not sent; the Dockerfile's LABEL lines are
    assert "imageLabels" not in spec["output"]


def _drop_nulls(obj):
    if isinstance(obj, dict):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nulls(v) for v in obj]
    return obj


@pytest.mark.skipif(not (F.SHARED / "schemas/jsonschema/build-build-v1-strict.json").exists(),
                    reason="../shared/schemas is absent (a newcomer's clone): no Build schema to check")
@pytest.mark.parametrize("with_inputs", [False, True])
def test_build_validates_against_the_strict_schema(with_inputs):
    import jsonschema
    schema = json.loads((F.SHARED / "schemas/jsonschema/build-build-v1-strict.json").read_text())
    material = desired.Material(inputs=buildinputs.discover(INPUTS)) if with_inputs else None
    build = generate("openshift-image-builder", material)[-1]
    jsonschema.validate(_drop_nulls(build), schema)
    broken = json.loads(json.dumps(build))
    broken["spec"]["strategy"]["dockerStrategy"]["imageOptimisationPolicy"] = "typo"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def labelled(kind, name, type_, data, label=buildinputs.LABEL):
    obj = F.secret(name) if kind == "Secret" else F.configmap(name, {})
    obj["metadata"]["labels"] = {label: type_}
    obj["data"] = {k: base64.b64encode(v.encode()).decode() if kind == "Secret" else v for k, v in data.items()}
    if kind == "Secret":
        obj["type"] = "Opaque"
    return obj


INPUTS = [
    labelled("ConfigMap", "corp-ca", "internal-ca", {"ca.crt": "-----BEGIN CERTIFICATE-----"}),
    labelled("Secret", "rhsm", "entitlement", {"123.pem": "x", "123-key.pem": "y"}),
    labelled("ConfigMap", "repos", "yum-repos", {"corp.repo": "[corp]"}, label=buildinputs.ALIAS),
    labelled("Secret", "proxy", "proxy", {"https_proxy": "http://user:pw@proxy:3128", "unused": "z"}),
]


def test_discover_follows_the_type_table():
    found = buildinputs.discover(INPUTS)
    assert found.types == {"internal-ca", "entitlement", "yum-repos", "proxy"}
    assert {(m.kind, m.source, m.path) for m in found.mounts} == {
        ("ConfigMap", "corp-ca", "/etc/ocl/inputs/internal-ca"), ("Secret", "rhsm", "/etc/pki/entitlement"),
        ("ConfigMap", "repos", "/etc/yum.repos.d")}
    assert {"name": "SSL_CERT_FILE", "value": "/etc/ocl/inputs/internal-ca/ca.crt"} in found.env
    assert {"name": "HTTPS_PROXY", "valueFrom": {"secretKeyRef": {"name": "proxy", "key": "https_proxy"}}} in found.env
    assert not any(e["name"] == "HTTP_PROXY" for e in found.env)          # key absent: no env var
    assert found.skipped == ()


def test_unknown_type_is_skipped_with_a_reason():
    found = buildinputs.discover(INPUTS + [labelled("Secret", "mystery", "aws", {"k": "v"})])
    assert found.skipped == (f"skipped Secret/{F.NS}/mystery: unknown build-input type 'aws' (known: "
                             "entitlement, internal-ca, proxy, pull-secret, push-secret, rpm-gpg, yum-repos)",)
    assert "mystery" not in {m.source for m in found.mounts}


@pytest.mark.parametrize("extra, message", [
    (labelled("Secret", "rhsm2", "entitlement", {"a.pem": "x"}),
     f"build inputs Secret/{F.NS}/rhsm and Secret/{F.NS}/rhsm2 both set path /etc/pki/entitlement"),
    (labelled("ConfigMap", "ca2", "internal-ca", {"ca.crt": "y"}),
     f"build inputs ConfigMap/{F.NS}/ca2 and ConfigMap/{F.NS}/corp-ca both set path /etc/ocl/inputs/internal-ca"),
    (labelled("ConfigMap", "proxy2", "proxy", {"https_proxy": "x"}),
     f"build inputs ConfigMap/{F.NS}/proxy2 and Secret/{F.NS}/proxy both set env var HTTPS_PROXY"),
])
def test_clashing_inputs_name_both(extra, message):
    with pytest.raises(buildinputs.Conflict) as err:
        buildinputs.discover(INPUTS + [extra])
    assert str(err.value) == message


def test_input_may_not_take_the_builds_own_env_or_paths():
    env, paths = builders.reserved()
    assert "TAG" in env and "/etc/ocl/dockerfile" in paths
    with pytest.raises(buildinputs.Conflict) as err:
        buildinputs.discover([labelled("Secret", "p", "proxy", {"https_proxy": "x"})], {"HTTPS_PROXY"})
    assert "the build itself" in str(err.value)


@pytest.mark.parametrize("builder_type", BOTH)
def test_both_builders_receive_the_inputs_by_reference_or_not_at_all(builder_type):
    material = desired.Material(inputs=buildinputs.discover(INPUTS))
    objs = generate(builder_type, material)
    build = objs[-1]
    text = json.dumps(objs)
    assert "user:pw" not in text and base64.b64encode(b"http://user:pw@proxy:3128").decode() not in text
    if builder_type == "custom-pod-builder":
        (c,) = build["spec"]["containers"]
        env = {e["name"]: e for e in c["env"]}
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in build["spec"]["volumes"]}
        assert set(env["BUILD_VOLUMES"]["value"].split()) == {m.path for m in material.inputs.mounts}
        for m in material.inputs.mounts:
            assert mounts[m.path]["readOnly"] is True
            assert vols[m.volume] == ({"name": m.volume, "secret": {"secretName": m.source}} if m.kind == "Secret"
                                      else {"name": m.volume, "configMap": {"name": m.source}})
    else:
        docker = build["spec"]["strategy"]["dockerStrategy"]
        assert "env" not in docker                         # OpenShift writes env into the image as ENV
        env = {e["name"]: e for e in docker["buildArgs"]}
        vols = {v["name"]: v for v in docker["volumes"]}
        for m in material.inputs.mounts:
            assert vols[m.volume]["mounts"] == [{"destinationPath": m.path}]
            assert vols[m.volume]["source"]["type"] == m.kind
    if builder_type == "custom-pod-builder":
        assert env["HTTPS_PROXY"]["valueFrom"] == {"secretKeyRef": {"name": "proxy", "key": "https_proxy"}}
    else:       # a Build ignores valueFrom in buildArgs (openshift-docs): never passed, never copied
        assert "HTTPS_PROXY" not in env
    assert env["SSL_CERT_FILE"]["value"] == "/etc/ocl/inputs/internal-ca/ca.crt"
    dockerfile = objs[0]["data"]["Dockerfile"]
    assert "update-ca-trust" in dockerfile
    assert "update-ca-trust" not in generate(builder_type)[0]["data"]["Dockerfile"]


def dockercfg_secret(name, auths_map):
    obj = F.secret(name, type_="kubernetes.io/dockercfg", key=".dockercfg", payload=auths_map)
    return obj


@pytest.mark.parametrize("builder_type", BOTH)
def test_legacy_and_merged_auth_become_our_own_secrets(builder_type):
    pull = dockercfg_secret("pull-secret", {"quay.io": {"auth": "cHVsbDpwdw=="}})
    push = F.secret("push-secret")
    extra = labelled("Secret", "mirror-auth", "pull-secret", {})
    extra["data"] = {".dockerconfigjson": base64.b64encode(json.dumps(
        {"auths": {"mirror.local": {"auth": "bTpu"}, "quay.io": {"auth": "b3ZlcnJpZGRlbg=="}}}).encode()).decode()}
    material = desired.Material({"pull-secret": pull, "push-secret": push}, buildinputs.discover([extra]))
    objs = generate(builder_type, material)
    secrets = [o for o in objs if o["kind"] == "Secret"]
    assert len(secrets) == 1                                   # push is fine as it is
    (own,) = secrets
    assert own["type"] == "kubernetes.io/dockerconfigjson"
    assert own["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "ocl-reconciler"
    assert own["metadata"]["ownerReferences"][0]["kind"] == "MachineConfigPool"
    merged = json.loads(base64.b64decode(own["data"][".dockerconfigjson"]))
    assert merged == {"auths": {"mirror.local": {"auth": "bTpu"}, "quay.io": {"auth": "cHVsbDpwdw=="}}}
    build = objs[-1]
    text = json.dumps(build)
    assert own["metadata"]["name"] in text and '"push-secret"' in text
    assert "cHVsbDpwdw" not in text


def test_auth_errors_name_the_secret_not_its_content():
    bad = F.secret("s", payload=b"not json at all s3cr3t")
    with pytest.raises(auth.AuthError) as err:
        auth.auths(bad)
    assert "Secret s" in str(err.value) and "s3cr3t" not in str(err.value)


@pytest.mark.parametrize("kind, status, transient", [
    ("Pod", {"phase": "Failed", "reason": "Evicted"}, True),
    ("Pod", {"phase": "Failed", "reason": "NodeLost"}, True),
    ("Pod", {"phase": "Pending", "containerStatuses": [{"name": "image-build", "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}, True),
    ("Pod", {"phase": "Failed", "containerStatuses": [{"name": "image-build", "state": {"terminated": {
        "exitCode": 125, "message": "Error: writing blob: received unexpected HTTP status: 502 Bad Gateway"}}}]}, True),
    ("Pod", {"phase": "Failed", "containerStatuses": [{"name": "image-build", "state": {"terminated": {
        "exitCode": 1, "message": 'Error: building at STEP "RUN x": exit status 1'}}}]}, False),
    ("Pod", {"phase": "Failed", "containerStatuses": [{"name": "image-build", "state": {"terminated": {
        "exitCode": 1, "message": 'error building at STEP "RUN curl": i/o timeout'}}}]}, False),
    ("Build", {"phase": "Failed", "reason": "BuildPodEvicted"}, True),
    ("Build", {"phase": "Error", "reason": "BuildPodDeleted"}, True),
    # the builder gives push failures one reason; the log says which kind (docs/openshift-build.md)
    ("Build", {"phase": "Failed", "reason": "PushImageToRegistryFailed", "logSnippet":
               'error: build error: Failed to push image: After retrying 2 times, Push image still failed due '
               'to error: pinging container registry r.example.com: Get "https://r.example.com/v2/": dial tcp: '
               'i/o timeout'}, True),
    ("Build", {"phase": "Failed", "reason": "PushImageToRegistryFailed", "logSnippet":
               "error: build error: Failed to push image: After retrying 2 times, Push image still failed due "
               "to error: unable to retrieve auth token: invalid username/password: unauthorized"}, False),
    ("Build", {"phase": "Failed", "reason": "DockerBuildFailed"}, False),
    ("Build", {"phase": "Cancelled", "reason": "BuildPodDeleted"}, False),
])
def test_transient_or_deterministic(kind, status, transient):
    builder = builders.pod if kind == "Pod" else builders.build
    got = builder.read_status({"kind": kind, "metadata": {"name": "b", "namespace": "ns"}, "status": status})
    assert got.state == A.FAILED and got.transient is transient


def test_a_build_pod_being_deleted_by_someone_counts_until_it_is_gone():
    """`oc delete pod` (or an eviction) with a grace period: the kubelet kills the container (SIGKILL
    once the grace period is over: exit code 137, reason Error) and reports the Pod Failed before the
    API server removes it. A run in between reads a Pod being deleted (metadata.deletionTimestamp),
    not a failed build: it waits until the Pod is gone, which is then tried again (docs/contract.md,
    RETRY: its Pod deleted by someone), on the build storage volume the Pod no longer mounts. Seen
    on the real node (tests/realnode/test_build_faults.py): such a build failed the pool."""
    pod = {"kind": "Pod", "metadata": {"name": "b", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"},
           "status": {"phase": "Failed", "containerStatuses": [{"name": "image-build", "state": {"terminated": {
               "exitCode": 137, "reason": "Error", "message": "Trying to pull r.example/base..."}}}]}}
    assert builders.pod.read_status(pod).state == A.BUILDING
    # one that ended before it was deleted keeps its result
    done = dict(pod, status={"phase": "Succeeded", "containerStatuses": [{"name": "image-build", "state": {
        "terminated": {"exitCode": 0, "message": "sha256:" + "a" * 64}}}]})
    assert builders.pod.read_status(done).state == A.SUCCEEDED
