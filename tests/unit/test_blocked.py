"""Every Blocked reason: a one-line message naming the object and key; other pools go on."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild import encoding
from tests.support import factory as F

#: kube-apiserver refuses a ConfigMap whose data adds up to more than core.MaxSecretSize, 1 MiB
#: (kubernetes/kubernetes pkg/apis/core/validation/validation.go ValidateConfigMap, types.go)
CONFIGMAP_LIMIT = 1024 * 1024

GOOD = [F.build_config(), F.osimageurl(), F.secret("pull-secret"), F.secret("push-secret")]


def with_settings(*replace):
    names = {(o["kind"], o["metadata"]["name"]) for o in replace if o.get("kind")}
    return [o for o in GOOD if (o["kind"], o["metadata"]["name"]) not in names] + [
        o for o in replace if o.get("kind")]


def without(kind, name):
    return [o for o in GOOD if (o["kind"], o["metadata"]["name"]) != (kind, name)]


CASES = {
    "no build config": (without("ConfigMap", "on-cluster-build-config"),
                        "ConfigMap ocl-reconciler/on-cluster-build-config not found"),
    "no osimageurl": (without("ConfigMap", "machine-config-osimageurl"),
                      "ConfigMap openshift-machine-config-operator/machine-config-osimageurl not found"),
    "pull secret key missing, no global pull secret": (
        with_settings(F.build_config(baseImagePullSecretName=None)),
        "Secret openshift-config/pull-secret (the global pull secret: on-cluster-build-config sets no "
        "'baseImagePullSecretName') not found"),
    "push secret key empty": (with_settings(F.build_config(finalImagePushSecretName=" ")),
                              "ConfigMap on-cluster-build-config: required key 'finalImagePushSecretName' is empty"),
    "pullspec missing": (with_settings(F.build_config(finalImagePullspec=None)),
                         "ConfigMap on-cluster-build-config: required key 'finalImagePullspec' is missing"),
    "pullspec invalid": (with_settings(F.build_config(finalImagePullspec="Registry/UPPER:tag")),
                         "ConfigMap on-cluster-build-config: key 'finalImagePullspec': 'Registry/UPPER:tag' is not a valid image reference"),
    "base image missing": (with_settings(F.osimageurl(baseOSContainerImage=None)),
                           "ConfigMap machine-config-osimageurl: required key 'baseOSContainerImage' is missing"),
    "base image invalid": (with_settings(F.osimageurl(baseOSContainerImage="quay.io/x y")),
                           "ConfigMap machine-config-osimageurl: key 'baseOSContainerImage': image reference 'quay.io/x y' contains whitespace"),
    "unknown builder": (with_settings(F.build_config(imageBuilderType="kaniko")),
                        "ConfigMap on-cluster-build-config: key 'imageBuilderType': unknown builder 'kaniko' (want one of custom-pod-builder, openshift-image-builder)"),
    "pull secret absent": (without("Secret", "pull-secret"),
                           "Secret ocl-reconciler/pull-secret (from on-cluster-build-config key 'baseImagePullSecretName') not found"),
    "push secret wrong type": (with_settings(F.secret("push-secret", type_="Opaque", key="password")),
                               "Secret ocl-reconciler/push-secret (from on-cluster-build-config key 'finalImagePushSecretName') is of type Opaque without key .dockerconfigjson; want type kubernetes.io/dockerconfigjson"),
    "push secret not JSON": (with_settings(F.secret("push-secret", payload=b"s3cr3t-not-json")),
                             "Secret ocl-reconciler/push-secret: key .dockerconfigjson is empty or not a JSON object"),
    "unknown rollout gate": (with_settings(F.build_config(rollout="machineconfig", rolloutGate="maybe")),
                             "ConfigMap on-cluster-build-config: key 'rolloutGate': unknown value 'maybe' (want one of hold, none)"),
    "hold timeout not a duration": (with_settings(F.build_config(rollout="machineconfig", holdTimeout="2 days")),
                                    "ConfigMap on-cluster-build-config: key 'holdTimeout': '2 days' is not a positive duration (e.g. 2h, 90m, 1h30m, 600s)"),
    "release with control chars": (with_settings(F.osimageurl(releaseVersion="4.16\n0")),
                                   "ConfigMap machine-config-osimageurl: key 'releaseVersion' holds control characters"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_settings_problem_blocks_every_opted_in_pool(any_cli, case):
    settings, message = CASES[case]
    items = F.cluster(F.pool("worker"), F.pool("infra"), settings=settings)
    code, after, err = any_cli.run(items)
    assert code == 2
    assert after, "--write-snapshot is still written"
    for name in ("worker", "infra"):
        a = F.the_pool(after, name)["metadata"]["annotations"]
        assert a[A.STATE] == A.BLOCKED
        assert a[A.MESSAGE] == message
        assert a[A.RENDERED] == f"rendered-{name}-1"
        assert a["example.com/keep"] == "theirs"
    assert F.owned(after) == []
    assert "s3cr3t" not in err and "s3cr3t" not in str(after[-1])
    # stable: the next run writes nothing and still exits 2
    code, again, _ = any_cli.run(after)
    assert (code, again) == (2, after)


def test_blocked_pool_does_not_stop_others(any_cli):
    bad = F.pool("infra", rendered="rendered-infra-missing")
    items = [o for o in F.cluster(F.pool("worker"), bad)
             if o["metadata"]["name"] != "rendered-infra-missing"]
    code, after, _ = any_cli.run(items)
    assert code == 2
    infra = F.the_pool(after, "infra")["metadata"]["annotations"]
    assert (infra[A.STATE], infra[A.MESSAGE]) == (A.BLOCKED, "MachineConfig rendered-infra-missing not found")
    assert F.the_pool(after, "worker")["metadata"]["annotations"][A.STATE] == A.PENDING


def test_pool_without_rendered_config_is_blocked(any_cli):
    pool = F.pool("worker")
    pool["spec"]["configuration"] = {}
    code, after, _ = any_cli.run(F.cluster(F.pool("infra")) + [pool])
    assert code == 2
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.MESSAGE] == "MachineConfigPool worker: spec.configuration.name is empty; no rendered MachineConfig to build yet"
    assert A.RENDERED not in a


def _incompressible(items, size):
    import base64
    import os
    mc = F.find(items, "MachineConfig")[0]
    blob = base64.b64encode(os.urandom(size)).decode()
    mc["spec"]["config"]["storage"]["files"][0]["contents"]["source"] = "data:;base64," + blob
    return mc


def test_machineconfig_over_the_ceiling_is_blocked_with_sizes(any_cli):
    items = F.cluster()
    mc = _incompressible(items, 6_500_000)
    encoded = len(encoding.encode(mc))
    assert encoded > encoding.CEILING
    code, after, _ = any_cli.run(items)
    assert code == 2
    message = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
    assert message.startswith(f"MachineConfig rendered-worker-1: encoded size {encoded} bytes (")
    # 8 MiB in parts of 1,000,000 bytes, one ConfigMap each: 8 full parts and one of 388,608 bytes
    assert message.endswith("exceeds the ceiling of 8388608 bytes (9 ConfigMaps)")
    assert F.owned(after) == []


def test_machineconfig_over_one_configmap_is_split(any_cli):
    items = F.cluster()
    mc = _incompressible(items, 900_000)
    code, after, _ = any_cli.run(items)
    assert code == 0
    parts = sorted((o for o in F.owned(after) if o["kind"] == "ConfigMap" and "Dockerfile" not in o["data"]),
                   key=lambda o: next(iter(o["data"])))
    assert [next(iter(p["data"])) for p in parts] == ["machineconfig.json.gz.000", "machineconfig.json.gz.001"]
    assert all(sum(len(k) + len(v) for k, v in p["data"].items()) < CONFIGMAP_LIMIT for p in parts)
    assert encoding.decode("".join(next(iter(p["data"].values())) for p in parts)) == encoding.build_view(mc)
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "machineconfig"]
    assert {s["configMap"]["name"] for s in volume["projected"]["sources"]} == {p["metadata"]["name"] for p in parts}


def test_recovery_from_blocked_starts_the_build(any_cli):
    items = F.cluster(settings=without("Secret", "push-secret"))
    blocked = any_cli.run(items)[1]
    fixed = copy.deepcopy(blocked) + [F.secret("push-secret")]
    code, after, _ = any_cli.run(fixed)
    assert code == 0
    a = F.the_pool(after)["metadata"]["annotations"]
    assert (a[A.STATE], a[A.MESSAGE]) == (A.PENDING, "")


@pytest.mark.parametrize("key, how", [("baseImagePullSecretName", "empty")] + [
    (k, h) for k in ("finalImagePushSecretName", "finalImagePullspec") for h in ("missing", "empty")])
def test_each_required_build_config_key(run_cli, key, how):
    config = F.build_config(**{key: None if how == "missing" else ""})
    code, after, _ = run_cli.run(F.cluster(settings=with_settings(config)))
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == \
        f"ConfigMap on-cluster-build-config: required key {key!r} is {how}"


@pytest.mark.parametrize("how", ["missing", "empty"])
def test_base_image_key(run_cli, how):
    config = F.osimageurl(baseOSContainerImage=None if how == "missing" else "")
    code, after, _ = run_cli.run(F.cluster(settings=with_settings(config)))
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == \
        f"ConfigMap machine-config-osimageurl: required key 'baseOSContainerImage' is {how}"


@pytest.mark.parametrize("pullspec, why", [
    ("registry.example.com/UPPER/image:tag", "is not a valid image reference"),
    ("registry.example.com/image :tag", "contains whitespace"),
    ("registry.example.com:5000/", "is not a valid image reference"),
    ("@sha256:" + "a" * 64, "is not a valid image reference"),
    ("registry.example.com/image:-bad-tag", "is not a valid image reference"),
    ("registry.example.com/image:" + "t" * 129, "is not a valid image reference"),
    # MachineOSConfig's renderedImagePushSpec rule (openshift/api machineosconfigs CRD):
    ("ocl/os-image:latest", "must be host[:port][/namespace]/name:tag with a registry host and no digest"),
    ("localhost:5000/ocl/os-image:latest", "with a registry host"),
    ("registry.example.com/ocl/os-image", "must be host[:port][/namespace]/name:tag"),
    ("registry.example.com/ocl/os-image@sha256:" + "a" * 64, "and no digest"),
    ("registry.example.com/ocl/os-image:v1@sha256:" + "a" * 64, "and no digest"),
])
def test_malformed_pullspec(run_cli, pullspec, why):
    code, after, _ = run_cli.run(F.cluster(settings=with_settings(F.build_config(finalImagePullspec=pullspec))))
    assert code == 2
    message = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
    assert message.startswith("ConfigMap on-cluster-build-config: key 'finalImagePullspec': ") and why in message
    assert "\n" not in message


@pytest.mark.parametrize("secret, why", [
    (F.secret("pull-secret", payload=b""), "key .dockerconfigjson is empty or not a JSON object"),
    (F.secret("pull-secret", payload={}), "key .dockerconfigjson is empty or not a JSON object"),
    (F.secret("pull-secret", payload=b"{not json"), "key .dockerconfigjson is empty or not a JSON object"),
    (F.secret("pull-secret", type_="kubernetes.io/basic-auth", key="password"), "is of type kubernetes.io/basic-auth"),
])
def test_bad_pull_secret(run_cli, secret, why):
    code, after, _ = run_cli.run(F.cluster(settings=with_settings(secret)))
    assert code == 2
    message = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
    assert message.startswith("Secret ") and "pull-secret" in message and why in message


@pytest.mark.parametrize("spec", [None, {}, {"config": "not an object"}, {"config": ["list"]}])
def test_rendered_machineconfig_without_a_config_object(run_cli, spec):
    items = F.cluster()
    mc = F.find(items, "MachineConfig")[0]
    if spec is None:
        del mc["spec"]
    else:
        mc["spec"] = spec
    code, after, _ = run_cli.run(items)
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == \
        "MachineConfig rendered-worker-1: spec.config is missing or not a JSON object"


@pytest.mark.parametrize("text, why", [
    ("FORM configs AS final\n", "line 1: unknown instruction 'FORM'"),
    ("# comment\nFROM configs AS final\nRUN\n", "line 3: RUN needs arguments"),
    ("FROM configs AS final\nRUN echo a && \\\n", "line 2: the last instruction ends with a line continuation"),
])
def test_custom_dockerfile_that_does_not_parse(run_cli, text, why):
    custom = F.configmap("on-cluster-build-custom-dockerfile", {"worker": text, "infra": "FROM configs AS final\n"})
    code, after, _ = run_cli.run(F.cluster(F.pool("worker"), F.pool("infra"), extra=[custom]))
    assert code == 2
    assert F.the_pool(after, "worker")["metadata"]["annotations"][A.MESSAGE] == \
        f"ConfigMap on-cluster-build-custom-dockerfile: key 'worker': {why}"
    assert F.the_pool(after, "infra")["metadata"]["annotations"][A.STATE] == A.PENDING


def test_very_long_pool_names_are_shortened_without_collisions(any_cli):
    prefix = "p" * 240
    pools = [F.pool(prefix + "-a"), F.pool(prefix + "-b")]
    code, after, _ = any_cli.run(F.cluster(*pools))
    assert code == 0
    for pool in pools:
        name = pool["metadata"]["name"]
        mine = [o for o in F.owned(after) if o["metadata"]["ownerReferences"][0]["name"] == name]
        assert len(mine) == 3
        assert all(len(o["metadata"]["name"]) <= 253 and len(o["metadata"]["labels"]["ocl-reconciler.io/pool"]) <= 63
                   for o in mine)
        assert F.the_pool(after, name)["metadata"]["annotations"][A.STATE] == A.PENDING
    labels = {o["metadata"]["labels"]["ocl-reconciler.io/pool"] for o in F.owned(after)}
    names = {o["metadata"]["name"] for o in F.owned(after)}
    assert len(labels) == 2 and len(names) == 6
    assert any_cli.run(after)[1] == after                     # and they converge


def test_broken_settings_keep_running_builds(run_cli):
    started = run_cli.run(F.cluster())[1]
    broken = [o for o in started if o["metadata"]["name"] != "machine-config-osimageurl"]
    code, after, _ = run_cli.run(broken)
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.STATE] == A.BLOCKED
    assert len(F.owned(after)) == 3                          # nothing that should be kept is deleted


@pytest.mark.parametrize("pullspec", [
    "registry.example.com/ocl/os-image:latest", "registry.example.com:5000/ns/sub/os-image:v1.2",
    "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/os-image:latest",
    "127.0.0.1:5000/ocl/os-image:latest"])
def test_pullspecs_machineosconfig_accepts_are_accepted(run_cli, pullspec):
    code, after, _ = run_cli.run(F.cluster(settings=with_settings(F.build_config(finalImagePullspec=pullspec))))
    assert code == 0, F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]


def global_pull_secret(payload=None):
    secret = F.secret("pull-secret", payload=payload or {"auths": {"quay.io": {"auth": "Z2xvYmFsOnB1bGw="}}})
    secret["metadata"]["namespace"] = "openshift-config"
    return secret


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_without_a_pull_secret_name_the_global_pull_secret_is_copied_and_used(any_cli, monkeypatch, builder):
    """As the MCO does (#4756): openshift-config/pull-secret, copied into a Secret of ours because a
    build can only mount Secrets of its own namespace."""
    monkeypatch.setattr(F, "BUILDER", builder)
    settings = [F.build_config(baseImagePullSecretName=None), F.osimageurl(), F.secret("push-secret")]
    code, after, _ = any_cli.run(F.cluster(settings=settings, extra=[global_pull_secret()]))
    assert code == 0
    (ours,) = [o for o in F.owned(after) if o["kind"] == "Secret"]
    assert ours["metadata"]["annotations"]["ocl-reconciler.io/auth-from"] == "openshift-config/pull-secret"
    copied = json.loads(base64.b64decode(ours["data"][".dockerconfigjson"]))
    assert copied["auths"]["quay.io"]["auth"] == "Z2xvYmFsOnB1bGw="
    (build,) = [o for o in F.owned(after) if o["kind"] == F.BUILD_KINDS[builder]]
    assert ours["metadata"]["name"] in json.dumps(build)
    assert ours["metadata"]["name"].startswith("ocl-pull-worker-")


def test_without_a_pull_secret_name_a_missing_global_pull_secret_blocks(run_cli):
    settings = [F.build_config(baseImagePullSecretName=None), F.osimageurl(), F.secret("push-secret")]
    code, after, _ = run_cli.run(F.cluster(settings=settings))
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == (
        "Secret openshift-config/pull-secret (the global pull secret: on-cluster-build-config sets no "
        "'baseImagePullSecretName') not found")
