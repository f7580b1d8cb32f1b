"""Signing at the planning level (issue 41, docs/signing.md): the settings keys, the key Secrets'
fingerprints, the signing Pod, the gate that holds a new or in-use image back until it is signed
with every current key, rotation with two keys, and turning signing off under a policy.

Expected values come from upstream, not from our output: the fingerprint is openssl's SHA-256 of
the key's DER (run here); the Secret's keys are those `cosign generate-key-pair k8s://` writes
(sigstore/cosign pkg/cosign/kubernetes/secret.go); the signature tag is cosign's
(pkg/oci/remote/remote.go, `SignatureTag`); the cosign invocation is the one
tests/realtools/test_signing.py runs against cosign v2.4.1.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import shutil
import subprocess

import kubelet
import pytest

from reconcile.cluster import apply, observe
from reconcile.cluster.memory import MemoryCluster
from reconcile.cluster.planner import Planner
from reconcile.contract import annotations as A
from reconcile.contract import objects
from reconcile.contract.problem import Problem
from reconcile.core.transitions import Transition
from reconcile.imagebuild import settings, signing
from reconcile.imagebuild.signing import signer
from tests.support import factory as F

#: two P-256 public keys made with `openssl ecparam -name prime256v1 -genkey | openssl ec -pubout`
PUB_OLD = b"""-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESrphmVFs9W3De241iGC0/5P6Bfbo
j3ZSfXszzwu2kNtlORHnRKbmnsi8NpzlW0YTmQsddIFzP42D0M+g2gVNRA==
-----END PUBLIC KEY-----
"""
PUB_NEW = b"""-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAECAwp0na0wVdFQ59e7F8P42/JKX5B
GWDL1QVeE1dMl4bIjry+USJMauidwXRHS1ubTlfBRiIkAXSVEHnW/Zs66g==
-----END PUBLIC KEY-----
"""


def key_secret(name: str, pub: bytes = PUB_OLD, drop: str = "") -> dict:
    data = {"cosign.key": base64.b64encode(b"encrypted private key").decode(),
            "cosign.pub": base64.b64encode(pub).decode(), "cosign.password": base64.b64encode(b"pw").decode()}
    data.pop(drop, None)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": F.NS, "uid": f"uid-{name}", "resourceVersion": "3"},
            "data": data}


def openssl_fingerprint(pem: bytes) -> str:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pem, capture_output=True,
                         check=True).stdout
    return "sha256:" + hashlib.sha256(der).hexdigest()


def signing_cluster(keys: str = "cosign-old", pool=None, extra=()) -> MemoryCluster:
    items = F.cluster(pool or F.pool(), settings=[
        F.build_config(imageSigningKeySecretName=keys), F.osimageurl(), F.secret("pull-secret"),
        F.secret("push-secret"), key_secret("cosign-old"), key_secret("cosign-new", PUB_NEW)])
    return MemoryCluster(items + list(extra), clock=lambda: F.NOW)


def run(cluster: MemoryCluster):
    seen = observe.observe(cluster, F.NS)
    plans = Planner(cluster, seen, F.NOW).plan()
    apply.execute(cluster, plans, F.NOW)
    return plans


def pods(cluster: MemoryCluster, prefix: str) -> list[dict]:
    return [p for p in cluster.list("Pod", F.NS) if objects.name(p).startswith(prefix)]


def set_sign_phase(cluster: MemoryCluster, pod: dict, phase: str, message: str = "") -> None:
    """What the kubelet writes on the signing Pod: each container terminated, exit 0 or 1."""
    pod = copy.deepcopy(pod)
    names = [c["name"] for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]]
    code = 0 if phase == "Succeeded" else 1
    pod["status"] = {"phase": phase, "containerStatuses": [
        {"name": n, "state": {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed",
                                             "message": message}}} for n in names]}
    cluster.store[("Pod", F.NS, objects.name(pod))] = pod


def set_keys(cluster: MemoryCluster, value: str | None) -> None:
    cm = cluster.store[("ConfigMap", F.NS, "on-cluster-build-config")]
    if value is None:
        cm["data"].pop("imageSigningKeySecretName", None)
    else:
        cm["data"]["imageSigningKeySecretName"] = value


def ann(cluster: MemoryCluster) -> dict:
    return objects.annotations(cluster.get("MachineConfigPool", "", "worker"))


def signed_then(cluster: MemoryCluster, sign_pod: dict, image: str, then: Transition) -> None:
    """The signing Pod succeeds: the next run goes on with `then` and records the image signed."""
    set_sign_phase(cluster, sign_pod, "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == then.name
    assert ann(cluster)[A.SIGNED] == f"{image}={signing.fingerprint(PUB_OLD)}"


# -- settings ------------------------------------------------------------------------------------

def read(**build):
    return settings.read(F.NS, {"on-cluster-build-config": F.build_config(**build),
                                "machine-config-osimageurl": F.osimageurl()})


def test_signing_is_off_without_the_key_and_the_signer_image_defaults_to_a_digest():
    s = read()
    assert not s.signs and s.signing_secrets == ()
    assert "@sha256:" in s.signer_image and s.signer_image.startswith("gcr.io/projectsigstore/cosign:v2.4.1")


@pytest.mark.parametrize(("build", "key"), [
    ({"imageSigningKeySecretName": "Bad_Name"}, "imageSigningKeySecretName"),
    ({"imageSigningKeySecretName": "a,b,c"}, "imageSigningKeySecretName"),
    ({"imageSigningKeySecretName": "a,a"}, "imageSigningKeySecretName"),
    ({"imageSignerImage": "gcr.io/projectsigstore/cosign:v2.4.1"}, "imageSignerImage"),
    ({"imageSignerImage": "not a ref"}, "imageSignerImage"),
    ({"imageSigningKeySecretName": "k", "finalImagePushSecretName": "other/push"}, "finalImagePushSecretName"),
])
def test_invalid_signing_settings_name_the_key(build, key):
    with pytest.raises(settings.SettingsError) as err:
        read(**build)
    assert f"'{key}'" in str(err.value) and "on-cluster-build-config" in str(err.value)


def test_two_keys_while_rotating():
    assert read(imageSigningKeySecretName="cosign-old, cosign-new").signing_secrets == ("cosign-old", "cosign-new")


def test_the_fingerprint_is_openssls_sha256_of_the_public_keys_der():
    assert signing.fingerprint(PUB_OLD) == openssl_fingerprint(PUB_OLD)
    assert signing.fingerprint(PUB_NEW) == openssl_fingerprint(PUB_NEW) != signing.fingerprint(PUB_OLD)


@pytest.mark.parametrize(("secret", "said"), [
    (None, "not found"),
    (key_secret("k", drop="cosign.password"), "has no key cosign.password"),
    (key_secret("k", drop="cosign.key"), "has no key cosign.key"),
    (key_secret("k", pub=b"not a key"), "key cosign.pub holds no PEM PUBLIC KEY"),
])
def test_a_bad_key_secret_blocks_every_pool_naming_it_and_never_its_value(secret, said):
    cluster = signing_cluster("k", extra=[secret] if secret else [])
    found = observe.observe(cluster, F.NS).settings
    assert isinstance(found, Problem)
    assert f"Secret {F.NS}/k" in found.message and said in found.message
    assert "imageSigningKeySecretName" in found.message and "cHc=" not in found.message


def test_the_signature_tag_is_cosigns():
    image = f"{F.REPO}@sha256:" + "ab" * 32
    assert signing.sig_tag(image) == f"{F.REPO}:sha256-{'ab' * 32}.sig"
    assert signing.sig_tag(f"{F.REPO}:latest") is None


# -- the signing Pod -----------------------------------------------------------------------------

def test_the_signing_pod_signs_the_digest_with_each_key_in_turn_and_holds_no_secret_value():
    image = f"{F.REPO}@sha256:" + "c" * 64
    pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={}, annotations={}, owner={},
                        image=image, keys=("cosign-old", "cosign-new"), signer_image=signing.DEFAULT_SIGNER_IMAGE,
                        push_secret="push-secret")
    spec = pod["spec"]
    (first,), (last,) = spec["initContainers"], spec["containers"]
    for i, c in enumerate((first, last), 1):
        assert c["args"] == ["sign", "--key", f"/etc/ocl/signing/{i}/cosign.key", "--tlog-upload=false", "--yes",
                             image]
        assert {"name": "COSIGN_PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": ("cosign-old", "cosign-new")[i - 1], "key": "cosign.password"}}} in c["env"]
        assert all("value" not in e or e["name"] != "COSIGN_PASSWORD" for e in c["env"])
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["key-1"]["secret"] == {"secretName": "cosign-old", "items": [{"key": "cosign.key",
                                                                                 "path": "cosign.key"}]}
    assert spec["automountServiceAccountToken"] is False
    assert "cosign.pub" not in str(spec["volumes"]) and "cosign.password" not in str(spec["volumes"])


def test_a_failed_signer_reads_as_a_failure_with_cosigns_last_line():
    pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={}, annotations={}, owner={},
                        image=f"{F.REPO}@sha256:" + "c" * 64, keys=("k",), signer_image="i@sha256:" + "d" * 64,
                        push_secret="p")
    pod["status"] = {"phase": "Failed", "containerStatuses": [{"name": "sign-1", "state": {"terminated": {
        "exitCode": 1, "message": "Error: signing [x]: accessing entity: PUT https://r/v2/: UNAUTHORIZED\n"}}}]}
    got = signer.read_status(pod)
    assert got.state == A.FAILED and got.digest is None
    assert got.message.endswith("container sign-1 (exit code 1): Error: signing [x]: accessing entity: PUT "
                                "https://r/v2/: UNAUTHORIZED")


# -- the gate ------------------------------------------------------------------------------------

def built_and_pushed(cluster: MemoryCluster) -> str:
    run(cluster)
    (pod,) = pods(cluster, "ocl-build-")
    cluster.store[("Pod", F.NS, objects.name(pod))] = kubelet.set_phase(copy.deepcopy(pod), "Succeeded")
    return f"{F.REPO}@{kubelet.digest_for(objects.name(pod))}"


def signed_and_recorded(cluster: MemoryCluster) -> str:
    """A first build pushed, signed by the signing Pod and recorded; its image."""
    image = built_and_pushed(cluster)
    run(cluster)
    set_sign_phase(cluster, pods(cluster, "ocl-sign-")[0], "Succeeded")
    run(cluster)
    return image


def test_a_new_image_is_recorded_only_once_signed():
    cluster = signing_cluster()
    image = built_and_pushed(cluster)
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.BUILDING
    assert A.IMAGE not in ann(cluster) and A.SIGNED not in ann(cluster)
    (sign_pod,) = pods(cluster, "ocl-sign-")
    assert sign_pod["spec"]["containers"][0]["args"][-1] == image          # the digest, never a tag
    assert pods(cluster, "ocl-build-")                                       # the digest's source stays
    set_sign_phase(cluster, sign_pod, "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SUCCEED.name
    assert ann(cluster)[A.IMAGE] == image
    assert ann(cluster)[A.SIGNED] == f"{image}={signing.fingerprint(PUB_OLD)}"
    assert not pods(cluster, "ocl-sign-") and not pods(cluster, "ocl-build-")
    (plan,) = run(cluster)
    assert plan.transition == Transition.BUILT.name and not plan.actions


def test_a_signing_failure_is_a_failure_with_its_reason_and_no_image():
    cluster = signing_cluster()
    image = built_and_pushed(cluster)
    run(cluster)
    (sign_pod,) = pods(cluster, "ocl-sign-")
    set_sign_phase(cluster, sign_pod, "Failed", "Error: signing: reading key: decrypt: encrypted: decryption failed")
    run(cluster)
    got = ann(cluster)
    assert got[A.STATE] == A.FAILED and A.IMAGE not in got and A.SIGNED not in got
    assert image in got[A.MESSAGE] and "decryption failed" in got[A.MESSAGE]
    (plan,) = run(cluster)
    assert plan.transition == Transition.STAY_FAILED.name


def test_turning_signing_on_signs_the_image_in_use_and_builds_nothing():
    """A cluster left by the previous version (or with signing off) keeps its build id: nothing is
    rebuilt; the image in use is signed, and the record stays Succeeded meanwhile."""
    cluster = signing_cluster()
    set_keys(cluster, None)
    image = built_and_pushed(cluster)
    run(cluster)
    before = dict(ann(cluster))
    assert before[A.IMAGE] == image and A.SIGNED not in before
    set_keys(cluster, "cosign-old")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and plan.state_after == A.SUCCEEDED
    assert not pods(cluster, "ocl-build-")                                   # nothing rebuilt
    assert ann(cluster)[A.BUILD] == before[A.BUILD] and ann(cluster)[A.IMAGE] == image
    (sign_pod,) = pods(cluster, "ocl-sign-")
    signed_then(cluster, sign_pod, image, Transition.BUILT)


def test_rotation_signs_with_both_keys_then_records_the_new_one_alone():
    cluster = signing_cluster()
    image = signed_and_recorded(cluster)
    old, new = signing.fingerprint(PUB_OLD), signing.fingerprint(PUB_NEW)
    set_keys(cluster, "cosign-old,cosign-new")            # step 1
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name
    (sign_pod,) = pods(cluster, "ocl-sign-")
    assert [c["env"][0]["valueFrom"]["secretKeyRef"]["name"]
            for c in sign_pod["spec"]["initContainers"] + sign_pod["spec"]["containers"]] == ["cosign-old", "cosign-new"]
    set_sign_phase(cluster, sign_pod, "Succeeded")
    run(cluster)
    assert ann(cluster)[A.SIGNED] == f"{image}={old},{new}"
    set_keys(cluster, "cosign-new")                       # step 3
    (plan,) = run(cluster)
    assert plan.transition == Transition.BUILT.name and not pods(cluster, "ocl-sign-")
    assert ann(cluster)[A.SIGNED] == f"{image}={new}"


def test_a_rollback_reuses_an_image_only_once_it_is_signed_with_the_current_key():
    cluster = signing_cluster()
    d_image = signed_and_recorded(cluster)
    assert ann(cluster)[A.SIGNED].startswith(d_image)
    # the same image id again under another key: the reuse (a snapshot run takes the image as there)
    set_keys(cluster, "cosign-new")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name


def test_turning_signing_off_under_a_policy_for_our_repository_is_blocked_naming_both():
    policy = {"apiVersion": "config.openshift.io/v1", "kind": "ClusterImagePolicy",
              "metadata": {"name": "ocl-reconciler-images", "uid": "uid-cip", "resourceVersion": "1"},
              "spec": {"scopes": [F.REPO.rsplit("/", 1)[0]], "policy": {"rootOfTrust": {
                  "policyType": "PublicKey", "publicKey": {"keyData": base64.b64encode(PUB_OLD).decode()}}}}}
    cluster = signing_cluster(extra=[policy])
    built_and_pushed(cluster)
    run(cluster)
    set_sign_phase(cluster, pods(cluster, "ocl-sign-")[0], "Succeeded")
    run(cluster)
    set_keys(cluster, None)
    (plan,) = run(cluster)
    assert plan.state_after == A.BLOCKED
    assert "imageSigningKeySecretName" in plan.message and "ClusterImagePolicy ocl-reconciler-images" in plan.message
    cluster.store.pop(("ClusterImagePolicy", "", "ocl-reconciler-images"))
    (plan,) = run(cluster)
    assert A.SIGNED not in ann(cluster)


@pytest.mark.parametrize(("scope", "covered"), [
    (F.REPO, True), (F.REPO.rsplit("/", 1)[0], True), ("registry.example.com:5000", True),
    (F.REPO + "-other", False), ("quay.io/ocp", False), ("*.example.com", True), ("*.other.com", False)])
def test_which_policy_scopes_cover_our_repository(scope, covered):
    """containers-policy.json(5): a scope is a repository, a namespace or a host, or *.domain."""
    policy = {"metadata": {"name": "p"}, "spec": {"scopes": [scope]}}
    assert (signing.covering([policy], F.REPO) == ["p"]) is covered


def test_upgrade_a_cluster_the_previous_version_left_with_signing_off_rebuilds_and_writes_nothing():
    """The previous version wrote no `ocl-reconciler.io/signed` and read no key: its pools' record
    is BUILT here, with no write at all (the build id hashes no signing input)."""
    cluster = signing_cluster()
    set_keys(cluster, None)
    built_and_pushed(cluster)
    run(cluster)
    assert ann(cluster)[A.STATE] == A.SUCCEEDED and A.SIGNED not in ann(cluster)
    cluster.writes.clear()
    (plan,) = run(cluster)
    assert plan.transition == Transition.BUILT.name and cluster.writes == []


def test_the_openshift_build_path_signs_in_its_own_pod_after_the_build_completes():
    """An OpenShift Build has no step after its push (postCommit runs before it: openshift/api
    build/v1 types.go, `BuildPostCommitSpec`, "executed ... before the image is pushed"): the
    signing Pod follows a Complete Build, and the pool records Succeeded only after it."""
    items = F.cluster(F.pool(), settings=[
        F.build_config(imageSigningKeySecretName="cosign-old", imageBuilderType="openshift-image-builder"),
        F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret"), key_secret("cosign-old")])
    cluster = MemoryCluster(items, clock=lambda: F.NOW)
    run(cluster)
    (build,) = cluster.list("Build", F.NS)
    cluster.store[("Build", F.NS, objects.name(build))] = kubelet.set_phase(copy.deepcopy(build), "Succeeded")
    image = f"{F.REPO}@{kubelet.digest_for(objects.name(build))}"
    (plan,) = run(cluster)
    assert plan.transition == Transition.SIGN.name and A.IMAGE not in ann(cluster)
    (sign_pod,) = pods(cluster, "ocl-sign-")
    assert sign_pod["spec"]["containers"][0]["args"][-1] == image
    set_sign_phase(cluster, sign_pod, "Succeeded")
    (plan,) = run(cluster)
    assert plan.transition == Transition.SUCCEED.name and ann(cluster)[A.IMAGE] == image
    assert ann(cluster)[A.SIGNED] == f"{image}={signing.fingerprint(PUB_OLD)}"


@pytest.mark.parametrize("keys", [("cosign-old",), ("cosign-old", "cosign-new")])
def test_the_signing_pod_passes_strict_schema_validation_and_escapes_its_values(keys):
    """Kubernetes' own Pod schema (kubernetes-validate, 1.32, strict); a hostile value comes back
    as itself, not as YAML (the template's `yaml` filter)."""
    import kubernetes_validate
    hostile = 'x": {y: 1}\n  - z'
    pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={"a": hostile},
                        annotations={"b": hostile}, owner={"apiVersion": "v1", "kind": "MachineConfigPool",
                                                          "name": "worker", "uid": "u"},
                        image=f"{F.REPO}@sha256:" + "c" * 64, keys=keys,
                        signer_image=signing.DEFAULT_SIGNER_IMAGE, push_secret="push-secret")
    assert pod["metadata"]["annotations"] == {"b": hostile}
    pod["metadata"]["labels"] = {}
    kubernetes_validate.validate(pod, "1.32.0", strict=True)


def rollback(keys: dict):
    """A pool whose history maps the current build id to an image (a rollback); `keys`: secret
    name -> PEM public key, signing on with them. (settings, the START decision, its image)."""
    from reconcile.core import decision
    found = settings.with_keys(read(imageSigningKeySecretName=",".join(keys)),
                               {n: key_secret(n, pem) for n, pem in keys.items()})
    pool = F.pool()
    mcs = {pool["spec"]["configuration"]["name"]: F.machineconfig(pool["spec"]["configuration"]["name"])}
    bid = decision.decide_pool(found, pool, [], mcs).inputs.build_id
    image = f"{F.REPO}@sha256:" + "9" * 64
    pool["metadata"]["annotations"][A.IMAGES] = f"{bid}={image}"
    d = decision.decide_pool(found, pool, [], mcs)
    assert d.transition is Transition.START and d.candidate == image
    return found, d, image, mcs


def signed_lookup(image: str, *signed) -> object:
    """What the shell hands over for a labelled image with signing on: its signatures as read."""
    from reconcile.core import images
    from reconcile.imagebuild.signing import signatures
    return images.Lookup(image, True, signatures=tuple(signatures.Signature(*s) for s in signed))


def test_a_rollback_reuses_an_image_a_current_key_signed_and_records_it_signed_at_once():
    """The image the history names carries a valid signature by the current key in the registry:
    REUSE, recorded signed with that key's fingerprint, no signing Pod."""
    from reconcile.core import decision
    from reconcile.core.actions import table
    from tests.support.fakeregistry import cosign_signature, key_pair
    key, pem = key_pair()
    found, d, image, _ = rollback({"cosign-old": pem})
    d = decision.with_lookup(d, signed_lookup(image, cosign_signature(key, image.split("@")[1], F.REPO)))
    assert d.transition is Transition.REUSE and d.signed == f"{image}={signing.fingerprint(pem)}"
    plan = table.act(d, F.NOW)
    assert not [a for a in plan.actions if a.verb == "create" and a.obj["kind"] == "Pod"]
    got = objects.annotations(next(a.after for a in plan.actions if a.verb == "patch"))
    assert got[A.IMAGE] == image and got[A.SIGNED] == f"{image}={signing.fingerprint(pem)}"


@pytest.mark.parametrize("case", ["unsigned", "other-key", "other-digest", "other-repository"])
def test_a_rollback_to_an_image_no_current_key_signed_builds_again_and_signs_nothing(case):
    """Someone who may push put an image with our build-id label there (the label is computable):
    it is not signed by us, it is rebuilt, and the pool says why."""
    from reconcile.core import decision
    from reconcile.core.actions import table
    from tests.support.fakeregistry import cosign_signature, key_pair
    key, pem = key_pair()
    other, _ = key_pair()
    found, d, image, mcs = rollback({"cosign-old": pem})
    digest = image.split("@")[1]
    signed = {"unsigned": (), "other-key": (cosign_signature(other, digest, F.REPO),),
              "other-digest": (cosign_signature(key, "sha256:" + "8" * 64, F.REPO),),
              "other-repository": (cosign_signature(key, digest, "registry.example.com:5000/someone/else"),)}[case]
    why = {"unsigned": f"it has no cosign signature ({F.REPO}:sha256-{'9' * 64}.sig)",
           "other-key": f"none of its 1 signature(s) verifies with cosign-old ({signing.fingerprint(pem)[:19]})",
           "other-digest": f"its signature by cosign-old signs another image (sha256:{'8' * 64})",
           "other-repository": f"its signature by cosign-old names 'registry.example.com:5000/someone/else', "
                               f"not {F.REPO}"}[case]
    d = decision.with_lookup(d, signed_lookup(image, *signed))
    assert d.transition is Transition.START and d.signing is None
    plan = table.act(d, F.NOW, mcs[d.inputs.rendered_config])
    assert plan.message.startswith(f"building again: {image} is not reused: {why}: an image only found in the "
                                   "registry is reused only if a current key signed it, never signed by us; ")
    made = [a.obj for a in plan.actions if a.verb == "create" and a.obj["kind"] == "Pod"]
    assert [objects.name(p).split("-")[1] for p in made] == ["build"]          # a build, no signing Pod


def test_a_rollback_signed_with_one_of_two_current_keys_gets_the_other_before_it_is_recorded():
    """While a key is rotated: a valid signature by the old key proves the image ours, so the
    signing Pod adds the new key's (cosign skips the old key's); REUSE once both are there."""
    from reconcile.core import decision
    from reconcile.core.actions import table
    from tests.support.fakeregistry import cosign_signature, key_pair
    old, old_pem = key_pair()
    new, new_pem = key_pair()
    found, d, image, mcs = rollback({"cosign-old": old_pem, "cosign-new": new_pem})
    digest = image.split("@")[1]
    start = d
    d = decision.with_lookup(start, signed_lookup(image, cosign_signature(old, digest, F.REPO)))
    assert d.transition is Transition.SIGN and d.signing.then is Transition.REUSE and d.signing.image == image
    plan = table.act(d, F.NOW)
    (pod,) = [a.obj for a in plan.actions if a.verb == "create" and a.obj["kind"] == "Pod"]
    assert plan.state_after == A.BUILDING and pod["spec"]["containers"][0]["args"][-1] == image
    after = next(a.after for a in plan.actions if a.verb == "patch")
    assert A.IMAGE not in objects.annotations(after)
    # the signing Pod appended the new key's signature: the next run reads both and reuses
    d = decision.decide_pool(found, after, [], mcs)
    both = (cosign_signature(old, digest, F.REPO), cosign_signature(new, digest, F.REPO))
    d = decision.with_lookup(d, signed_lookup(image, *both))
    assert d.transition is Transition.REUSE
    got = objects.annotations(next(a.after for a in table.act(d, F.NOW).actions if a.verb == "patch"))
    assert got[A.IMAGE] == image
    assert got[A.SIGNED] == f"{image}={signing.fingerprint(old_pem)},{signing.fingerprint(new_pem)}"
