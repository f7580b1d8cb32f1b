"""The OpenShift Build path as OpenShift's own code writes a Build's status (issue 22): every reason
the controller or the builder sets, with statuses shaped as they write them, and what the pool
makes of each. Texts are quoted from openshift/openshift-controller-manager
pkg/build/controller/build/build_controller.go (the controller), openshift/builder
pkg/build/builder/docker.go, common.go and util/consts.go (the builder); docs/openshift-build.md
lists them with the commits read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild.builders import build

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def a_build(phase, reason=None, message=None, log=None, age=timedelta(minutes=1)):
    status = {"phase": phase, **({"reason": reason} if reason else {}), **({"message": message} if message else {}),
              **({"logSnippet": log} if log else {})}
    created = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "build.openshift.io/v1", "kind": "Build",
            "metadata": {"name": "b", "namespace": "ns", "creationTimestamp": created}, "status": status}


# (phase, reason, message, logSnippet) as written, and (state, transient) the pool gets
NEW = [
    # checkForNonExistantResources: "These resources do not exist:" + " ConfigMaps [..]"; return update, nil
    ("New", "GenericBuildFailed", "These resources do not exist: ConfigMaps [ocl-mc-worker-1]", None, True),
    # createPodSpec failed (e.g. a build volume path collision): "Failed to create pod spec: %s"
    ("New", "CannotCreateBuildPodSpec", "Failed to create pod spec: failed to create a build pod spec for build "
     'ns/b: user provided BuildVolumeMount path "/tmp/build" collides with VolumeMount path created by the build '
     "controller", None, False),
    # the builder ServiceAccount's secrets: "Unable to look up the service account secrets for this build."
    ("New", "CannotRetrieveServiceAccount", "Unable to look up the service account secrets for this build.", None,
     False),
    # Pods.Create refused (quota, admission): "Failed creating build pod: %s", requeued by the controller
    ("New", "CannotCreateBuildPod", 'Failed creating build pod: pods "b-build" is forbidden: exceeded quota', None,
     True),
    ("Pending", "MissingPushSecret", "Missing push secret.", None, False),
    # our Build names both secrets, so the controller skips its builder-account lookup; a missing
    # `builder` is refused by ServiceAccount admission at Pod create (kubernetes
    # plugin/pkg/admission/serviceaccount: "error looking up service account %s/%s: %v")
    ("New", "CannotCreateBuildPod", 'Failed creating build pod: pods "b-build" is forbidden: error looking up '
     'service account ns/builder: serviceaccount "builder" not found', None, False),
]


@pytest.mark.parametrize("phase, reason, message, log, transient", NEW)
def test_a_build_waiting_with_a_reason_says_it_then_stops_waiting_past_the_bound(phase, reason, message, log,
                                                                                 transient):
    waiting = build.read_status(a_build(phase, reason, message, log), NOW)
    assert waiting.state == A.PENDING
    assert waiting.message.startswith(f"build Build/ns/b is {phase}: {reason}: {message.rstrip('.')}")
    late = build.read_status(a_build(phase, reason, message, log, age=timedelta(seconds=build.NEW_BOUND_SECONDS + 1)),
                             NOW)
    assert late.state == A.FAILED and late.transient is transient and late.abandon
    assert late.message.startswith(f"build Build/ns/b stayed {phase} for more than 30 minutes after it was "
                                   f"created: {reason}")
    # within the bound, or with no clock: still waiting
    assert build.read_status(a_build(phase, reason, message, age=timedelta(minutes=29)), NOW).state == A.PENDING
    assert build.read_status(a_build(phase, reason, message, age=timedelta(hours=5))).state == A.PENDING


@pytest.mark.parametrize("reason, message", [
    ("CannotRetrieveServiceAccount", "Unable to look up the service account secrets for this build."),
    ("CannotCreateBuildPod", 'Failed creating build pod: pods "b-build" is forbidden: error looking up service '
                             'account ns/builder: serviceaccount "builder" not found'),
])
def test_a_missing_builder_account_names_what_to_do(reason, message):
    status = build.read_status(a_build("New", reason, message), NOW)
    assert "the namespace needs the `builder` ServiceAccount" in status.message


def test_a_new_build_without_a_reason_is_just_pending():
    assert build.read_status(a_build("New"), NOW) == build.BuildStatus(A.PENDING)
    assert build.read_status(a_build("Pending", age=timedelta(days=2)), NOW) == build.BuildStatus(A.PENDING)


PUSH = "error: build error: Failed to push image: After retrying 2 times, Push image still failed due to error: "
FAILED = [
    # the base image is pulled inside the build (our Dockerfile replaces the inline one): DockerBuildFailed
    ("DockerBuildFailed", "error: build error: creating build container: initializing source "
     "docker://quay.io/ocp/base:x: unable to retrieve auth token: invalid username/password: unauthorized", False),
    ("DockerBuildFailed", 'error: build error: creating build container: pinging container registry quay.io: Get '
     '"https://quay.io/v2/": dial tcp: lookup quay.io: no such host', True),
    # a RUN step (ignition-apply) fails: deterministic
    ("DockerBuildFailed", 'error: build error: building at STEP "RUN ignition-apply ...": while running runtime: '
     "exit status 1", False),
    ("PushImageToRegistryFailed", PUSH + "unable to retrieve auth token: invalid username/password: unauthorized",
     False),
    ("PushImageToRegistryFailed", PUSH + 'pinging container registry r.example.com: Get "https://r.example.com/v2/": '
     "dial tcp 10.0.0.1:443: connect: connection refused", True),
    ("PushImageToRegistryFailed", PUSH + "received unexpected HTTP status: 503 Service Unavailable", True),
    ("PushImageToRegistryFailed", PUSH + "toomanyrequests: You have reached your pull rate limit", True),
    # a certificate we do not trust is wrapped in the same "pinging" text: deterministic
    ("PushImageToRegistryFailed", PUSH + 'pinging container registry r.example.com: Get "https://r.example.com/v2/": '
     "tls: failed to verify certificate: x509: certificate signed by unknown authority", False),
    # set by the controller when the Pod ends (handleActiveBuild)
    ("BuildPodEvicted", "", True),
    ("GenericBuildFailed", "", True),        # the Pod failed and the builder wrote nothing (killed, deadline)
    ("OutOfMemoryKilled", "", False),
    ("BuildPodExists", "", True),           # a retry's Build has another name, hence another Pod
    ("FailedContainer", "", True),
]


@pytest.mark.parametrize("reason, log, transient", FAILED)
def test_each_failure_is_transient_as_the_real_builder_reports_it(reason, log, transient):
    status = build.read_status(a_build("Failed", reason, None, log or None), NOW)
    assert status.state == A.FAILED and status.transient is transient, status
    assert status.message.startswith(f"build Build/ns/b failed: {reason}")


def test_every_reason_of_the_api_is_in_the_table():
    """openshift/api build/v1 consts.go, the StatusReason* values (docs/openshift-build.md)."""
    api = {"Error", "CancelBuildFailed", "CannotCreateBuildPodSpec", "CannotCreateBuildPod", "InvalidOutputReference", "InvalidImageReference",
           "BuildPodDeleted", "ExceededRetryTimeout", "MissingPushSecret", "PostCommitHookFailed",
           "PushImageToRegistryFailed", "PullBuilderImageFailed", "FetchSourceFailed", "FetchImageContentFailed",
           "ManageDockerfileFailed", "CancelledBuild", "DockerBuildFailed", "BuildPodExists",
           "NoBuildContainerStatus", "FailedContainer", "UnresolvableEnvironmentVariable", "GenericBuildFailed",
           "OutOfMemoryKilled", "CannotRetrieveServiceAccount", "BuildPodEvicted"}
    assert api <= set(build.reasons())
    assert {r["retry"] for r in build.reasons().values()} <= {"always", "never", "log"}


@pytest.mark.parametrize("path, refused", [
    ("/tmp/build", True),                                    # BuildWorkDirMount
    ("/var/lib/containers", True),
    ("/var/run/secrets/openshift.io/push", True),            # the push secret's own mount
    ("/var/run/configs/openshift.io/build/corp-ca/", True),  # a source ConfigMap's directory
    ("/etc/pki/ca-trust", True),                             # the builder's transient mount
    ("/etc/ocl/inputs/internal-ca", False),                  # ours (manifests/build-inputs.yaml)
    ("/tmp/build-inputs", False),                            # the controller compares whole paths
])
def test_a_build_input_at_a_path_the_build_pod_uses_blocks_the_pool_naming_it(path, refused):
    from reconcile.core import desired
    from reconcile.imagebuild import builders, buildinputs
    material = desired.Material(inputs=buildinputs.Inputs(mounts=(buildinputs.Mount("v", "Secret", "corp", path),)))
    if refused:
        with pytest.raises(desired.Blocked, match=f"build input Secret/corp: mount path {path} is one the Build's own"):
            desired.build_inputs(builders.for_type("openshift-image-builder"), material)
    else:
        assert desired.build_inputs(builders.for_type("openshift-image-builder"), material).mounts[0].path == path
    # the Pod is ours: its own paths are refused when inputs are found, not here
    assert desired.build_inputs(builders.for_type("custom-pod-builder"), material).mounts[0].path == path


def test_both_builders_get_the_same_resources_and_deadline_from_the_settings(any_cli, builder):
    from tests.support import factory as F
    items = F.cluster(settings=[F.build_config(buildMemoryLimit="16Gi", buildTimeoutSeconds="3600",
                                               buildEphemeralStorageLimit="100Gi"), F.osimageurl(),
                                F.secret("pull-secret"), F.secret("push-secret")])
    code, after, err = any_cli.run(items)
    assert code == 0, err
    (obj,) = [o for o in F.owned(after, "worker") if o["kind"] in ("Pod", "Build")]
    want = {"requests": {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "20Gi"},
            "limits": {"memory": "16Gi", "ephemeral-storage": "100Gi"}}
    if obj["kind"] == "Pod":
        assert obj["spec"]["containers"][0]["resources"] == want and obj["spec"]["activeDeadlineSeconds"] == 3600
        # every emptyDir bounded by the limit (the controller makes the Build's Pod: not ours to size)
        empty = [v["emptyDir"] for v in obj["spec"]["volumes"] if "emptyDir" in v]
        assert empty and all(e == {"sizeLimit": "100Gi"} for e in empty)
    else:       # the controller copies both to its Pod (strategy/docker.go, strategy/util.go setupActiveDeadline)
        assert obj["spec"]["resources"] == want and obj["spec"]["completionDeadlineSeconds"] == 3600


@pytest.mark.parametrize("key, value, says", [
    ("buildMemoryLimit", "lots", "key 'buildMemoryLimit': 'lots' is not a quantity"),
    ("buildCPURequest", "-1", "key 'buildCPURequest': '-1' is not a quantity"),
    ("buildEphemeralStorageRequest", "a disk", "key 'buildEphemeralStorageRequest': 'a disk' is not a quantity"),
    ("buildEphemeralStorageLimit", "80 Gi", "key 'buildEphemeralStorageLimit': '80 Gi' is not a quantity"),
    ("buildTimeoutSeconds", "0", "key 'buildTimeoutSeconds': '0' is not a positive number of seconds"),
    ("buildTimeoutSeconds", "²", "key 'buildTimeoutSeconds': '²' is not a positive number of seconds"),
])
def test_a_bad_resource_setting_blocks_naming_the_key(key, value, says):
    from reconcile.imagebuild import settings
    from tests.support import factory as F
    with pytest.raises(settings.SettingsError, match=says):
        settings.read(F.NS, {"on-cluster-build-config": F.build_config(**{key: value}),
                             "machine-config-osimageurl": F.osimageurl()})


def _set_build_status(items, **status):
    for obj in items:
        if obj["kind"] == "Build":
            obj["status"] = dict(status)
    return items


def test_a_waiting_message_keeps_the_attempts_history_and_a_build_given_up_on_is_deleted(run_cli, monkeypatch):
    """Attempt 2 waits with a reason: its message keeps attempt 1's reason before what the Build
    says; when the reason clears the history stays; past the bound with a reason no retry cures,
    the pool is Failed with the history, and the Build (which the controller could still run) is
    deleted."""
    import copy

    from tests.support import factory as F
    monkeypatch.setattr(F, "BUILDER", "openshift-image-builder")
    code, items, err = run_cli.run(F.cluster())
    assert code == 0, err
    _set_build_status(items, phase="Failed", reason="BuildPodEvicted", message="The node was low on memory.")
    code, items, err = run_cli.run(items)
    ann = F.the_pool(items)["metadata"]["annotations"]
    assert ann[A.ATTEMPT] == "2" and ann[A.MESSAGE].startswith("attempt 2 of 3 after: attempt 1: build "), ann
    history = ann[A.MESSAGE]
    (b,) = F.find(items, "Build")
    ref = f"Build/{F.NS}/{b['metadata']['name']}"
    waiting = "These resources do not exist: ConfigMaps [x]"
    code, items, err = run_cli.run(_set_build_status(copy.deepcopy(items), phase="New", reason="GenericBuildFailed",
                                                     message=waiting))
    assert F.the_pool(items)["metadata"]["annotations"][A.MESSAGE] == \
        f"{history}; build {ref} is New: GenericBuildFailed: {waiting}"
    code, items, err = run_cli.run(_set_build_status(copy.deepcopy(items), phase="Pending"))
    assert F.the_pool(items)["metadata"]["annotations"][A.MESSAGE] == history          # the reason cleared
    items = _set_build_status(copy.deepcopy(items), phase="New", reason="CannotCreateBuildPodSpec",
                              message="Failed to create pod spec: x")
    created = datetime.strptime(F.find(items, "Build")[0]["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    later = created + timedelta(seconds=build.NEW_BOUND_SECONDS + 1)
    monkeypatch.setenv("OCL_RECONCILE_NOW", later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    code, items, err = run_cli.run(items)
    ann = F.the_pool(items)["metadata"]["annotations"]
    assert ann[A.STATE] == A.FAILED and ann[A.MESSAGE].startswith(f"build {ref} stayed New for more than 30"), ann
    assert not F.find(items, "Build")                           # deleted: it must not push later


def test_a_memory_request_above_its_limit_blocks_naming_both():
    from reconcile.imagebuild import settings
    from tests.support import factory as F
    with pytest.raises(settings.SettingsError, match="buildMemoryRequest 16Gi is more than buildMemoryLimit 8Gi"):
        settings.read(F.NS, {"on-cluster-build-config": F.build_config(buildMemoryRequest="16Gi"),
                             "machine-config-osimageurl": F.osimageurl()})
    ok = settings.read(F.NS, {"on-cluster-build-config": F.build_config(buildMemoryRequest="8192Mi"),
                              "machine-config-osimageurl": F.osimageurl()})
    assert ok.build_resources["requests"]["memory"] == "8192Mi"          # 8192Mi == 8Gi: allowed


def test_an_ephemeral_storage_request_above_its_limit_blocks_naming_both():
    from reconcile.imagebuild import settings
    from tests.support import factory as F
    with pytest.raises(settings.SettingsError, match="buildEphemeralStorageRequest 100Gi is more than "
                                                     "buildEphemeralStorageLimit 80Gi"):
        settings.read(F.NS, {"on-cluster-build-config": F.build_config(buildEphemeralStorageRequest="100Gi",
                                                                       buildEphemeralStorageLimit="80Gi"),
                             "machine-config-osimageurl": F.osimageurl()})
    # one of the two alone: the other follows the figures, lifted to it (imagebuild/disk.py)
    settings.read(F.NS, {"on-cluster-build-config": F.build_config(buildEphemeralStorageRequest="100Gi"),
                         "machine-config-osimageurl": F.osimageurl()})


@pytest.mark.parametrize("request_, limit, want", [
    (" ", "10Gi", ("10Gi", "10Gi")), ("\t \n", "10Gi", ("10Gi", "10Gi")), ("100Gi", "  ", ("100Gi", "100Gi"))])
def test_an_ephemeral_storage_key_set_to_whitespace_is_unset(request_, limit, want):
    """A key of only spaces is not set (as everywhere else in the settings): the one set is
    compared with nothing, and the other follows it (imagebuild/disk.py: a derived request is never
    above a limit that is set, nor a derived limit below a request that is set)."""
    from reconcile.core.storage import disk
    from reconcile.imagebuild import settings
    from tests.support import factory as F
    found = settings.read(F.NS, {"on-cluster-build-config": F.build_config(buildEphemeralStorageRequest=request_,
                                                                           buildEphemeralStorageLimit=limit),
                                 "machine-config-osimageurl": F.osimageurl()})
    got = disk.plan(found, None, settings.STORAGE_EMPTYDIR, "vfs")
    assert (got.request, got.limit) == want
