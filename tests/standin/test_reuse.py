"""Image reuse (issue 14): a pool that goes back to inputs it was built for reuses that build's
image when the registry still has it, as machine-os-builder does (openshift/machine-config-operator
#5268: a build's name is a hash of its inputs, the image is looked up before a build starts, and a
missing image is rebuilt, e2e `MissingImageIsRebuilt`). On snapshots the registry is not asked;
through the API-server stand-in a fake registry answers; tests/realapi/test_realapi.py has the same
rollback on the real API server with the real docker-registry."""

from __future__ import annotations

import copy
import hashlib
import json

import kubelet  # examples/kubelet.py
import pytest

from reconcile.cluster import registry
from reconcile.contract import annotations as A
from reconcile.core import events, images, lifecycle
from tests.conftest import ApiCli
from tests.support import factory as F
from tests.support.fakeregistry import DIGESTS, BearerRegistry, FakeRegistry, auths, serve

BUILD_ID = "ocl-reconciler.io/build-id"


def settings(host: str | None = None):
    """Settings whose push secret has credentials for `host`, the registry images go to."""
    if host is None:
        return None
    return [F.build_config(finalImagePullspec=f"{host}/ocl/os-image:latest"), F.osimageurl(),
            F.secret("pull-secret"), F.secret("push-secret", payload={"auths": auths(host)})]


def build_objects(items):
    return [o for o in F.owned(items, "worker") if o["kind"] in ("Pod", "Build")]


def switch(items, rendered):
    """The MCO renders `rendered` for the worker pool (its MachineConfig is created if new)."""
    items = copy.deepcopy(items)
    F.the_pool(items)["spec"]["configuration"]["name"] = rendered
    if not F.find(items, "MachineConfig", rendered):
        items.append(F.machineconfig(rendered))
    return items


def build_to_success(cli, items, pushed=None):
    """Run (a build starts), let the build succeed with a digest, run again. Returns the items
    and the build id that was built. `pushed`: what the build pushed, a digest for its build id
    (else the kubelet's made-up one)."""
    code, items, err = cli.run(items)
    assert code == 0, err
    (obj,) = build_objects(items)
    done = copy.deepcopy(items)
    for o in build_objects(done):
        kubelet.set_phase(o, "Succeeded", digest=pushed(o["metadata"]["labels"][BUILD_ID]) if pushed else None)
    code, items, err = cli.run(done)
    assert code == 0, err
    assert F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED
    return items, obj["metadata"]["labels"][BUILD_ID]


def test_a_rollback_on_a_snapshot_builds_twice_not_three_times(run_cli, builder):
    items, id_a = build_to_success(run_cli, F.cluster())
    image_a = F.the_pool(items)["metadata"]["annotations"][A.IMAGE]
    items, id_b = build_to_success(run_cli, switch(items, "rendered-worker-2"))
    assert id_b != id_a

    back = switch(items, "rendered-worker-1")
    code, out, _ = run_cli("diff", "--snapshot", str(run_cli.write(back)), "--color", "never")
    assert code == 1
    assert f"# pool worker: reuse {image_a}: a snapshot run does not ask the registry" in out
    assert out.splitlines()[-1] == "0 to create, 1 to patch, 0 to delete; pools: worker Succeeded -> Succeeded (reuse)"
    code, out, _ = run_cli("diff", "--snapshot", str(run_cli.write(back)), "-o", "json")
    (plan,) = json.loads(out)["pools"]
    assert (plan["transition"], plan["message"]) == ("REUSE", f"reused {image_a} of build {id_a}")
    assert [(a["verb"], a["kind"]) for a in plan["actions"]] == [("create", "Event"), ("patch", "MachineConfigPool")]
    assert plan["actions"][0]["object"]["reason"] == "BuildReused"

    code, after, err = run_cli.run(back)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert build_objects(after) == []                          # nothing built the third time
    assert (a[A.STATE], a[A.IMAGE], a[A.BUILT_CONFIG]) == (A.SUCCEEDED, image_a, "rendered-worker-1")
    assert a[A.MESSAGE] == f"reused {image_a} of build {id_a}"
    assert [e.split("=", 1)[0] for e in a[A.IMAGES].split()] == [id_a, id_b]     # A moved to the front
    reasons = [e["reason"] for e in F.find(after, "Event")]
    assert reasons.count("BuildStarted") == 2 and reasons.count("BuildReused") == 1
    code, again, _ = run_cli.run(after)                        # converged: nothing more
    assert code == 0 and build_objects(again) == []
    assert F.the_pool(again)["metadata"]["annotations"] == a


def test_a_second_rollback_to_the_same_image_is_told_again():
    """Events are named from the transition: reusing A, going to B and reusing A again are two
    BuildReused Events, not one swallowed as already told."""
    def reuse_event(pool, since):
        return events.event(pool, A.SUCCEEDED, "r/os@" + DIGESTS[0], "reused", "t", events.REUSED, since=since)
    pool = F.pool()
    first, second = reuse_event(pool, "2026-11-29T10:00:00Z"), reuse_event(pool, "2026-11-29T11:00:00Z")
    assert first["reason"] == second["reason"] == "BuildReused"
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert reuse_event(pool, "2026-11-29T10:00:00Z")["metadata"]["name"] == first["metadata"]["name"]


@pytest.fixture
def live_cli(tmp_path, capsys, monkeypatch):
    """Runs through the API-server stand-in, so that the registry is really asked."""
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return ApiCli(tmp_path, capsys)


def a_then_b(cli, host, pushed=None):
    """Rendered config A built, then B built, images pushed to `host`: ready to roll back to A.
    `pushed`: what A's build pushed to the fake registry, a digest for its build id (else the
    registry does not have A's image). Returns (items, A's build id, A's image)."""
    items, id_a = build_to_success(cli, F.cluster(settings=settings(host)), pushed)
    image_a = F.the_pool(items)["metadata"]["annotations"][A.IMAGE]
    items, _ = build_to_success(cli, switch(items, "rendered-worker-2"))
    return items, id_a, image_a


@pytest.mark.parametrize("handler", [FakeRegistry, BearerRegistry])
def test_a_live_rollback_asks_the_registry_and_reuses_what_it_has(live_cli, handler):
    with serve(handler, manifests=set()) as host:
        # A's image is in the registry, labelled by A's build
        items, id_a, image_a = a_then_b(live_cli, host, lambda build_id: handler.push({BUILD_ID: build_id}))
        assert handler.gets == handler.heads == []         # a build id never built is never looked up
        code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
        assert code == 0, err
        a = F.the_pool(after)["metadata"]["annotations"]
        assert (a[A.STATE], a[A.IMAGE], a[A.MESSAGE]) == (A.SUCCEEDED, image_a, f"reused {image_a} of build {id_a}")
        assert build_objects(after) == []
        blob = "sha256:" + hashlib.sha256(handler.config({BUILD_ID: id_a})).hexdigest()
        # the manifest and its config, authorised; no HEAD
        assert handler.gets == [f"/v2/ocl/os-image/manifests/{image_a.split('@')[1]}", f"/v2/ocl/os-image/blobs/{blob}"]
        assert handler.heads == []
        assert "BuildReused" in [e["reason"] for e in F.find(after, "Event")]


def test_a_live_rollback_rebuilds_an_image_the_registry_lost(live_cli):
    with serve(FakeRegistry, manifests=set()) as host:          # holds nothing: A's image is gone
        items, id_a, image_a = a_then_b(live_cli, host)
        code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.PENDING
    assert a[A.MESSAGE] == f"building again: {image_a} is gone from the registry"
    (obj,) = build_objects(after)
    assert obj["metadata"]["labels"][BUILD_ID] == id_a


@pytest.mark.parametrize("labels, why", [
    (None, f"its image config has no {BUILD_ID} label"),
    ({"other": "x"}, f"its image config has no {BUILD_ID} label"),
    ({BUILD_ID: "someoneelse"}, f"its image config's {BUILD_ID} label is 'someoneelse', not {{id_a}}"),
    ("list", f"its image config has no {BUILD_ID} label"),
])
def test_an_image_our_build_of_that_id_did_not_label_is_not_reused(live_cli, labels, why):
    """Issue 31: the history (a pool annotation anyone who may patch pools can write) maps the build
    id to an image of our repository, but that image's config does not carry our label for that
    build id: the pool builds again, and says why once."""
    with serve(FakeRegistry, manifests=set()) as host:
        items, id_a, image_a = a_then_b(live_cli, host, lambda _: FakeRegistry.push(
            None if labels == "list" else labels, as_list=labels == "list"))
        code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    message = f"building again: {image_a} is not reused: " + why.format(id_a=id_a)
    assert (a[A.STATE], a[A.MESSAGE]) == (A.PENDING, message)
    (obj,) = build_objects(after)
    assert obj["metadata"]["labels"][BUILD_ID] == id_a
    assert "BuildReused" not in [e["reason"] for e in F.find(after, "Event")]
    assert err.count(f"{image_a} is not reused") <= 1


def test_labels_reads_the_manifest_and_its_config():
    with serve(FakeRegistry) as host:
        labelled, bare = FakeRegistry.push({BUILD_ID: "abc", "x": "y"}), FakeRegistry.push()
        assert registry.labels(f"{host}/ocl/os-image@{labelled}", auths(host)) == {BUILD_ID: "abc", "x": "y"}
        assert registry.labels(f"{host}/ocl/os-image@{bare}", auths(host)) == {}
        assert registry.labels(f"{host}/ocl/os-image@sha256:{'9' * 64}", auths(host)) is None
        with pytest.raises(registry.RegistryError) as err:
            registry.labels(f"{host}/ocl/os-image@{labelled}", auths(host, "pusher:wrong"))
    assert "401" in str(err.value) and "wrong" not in str(err.value)


def test_labels_trusts_no_content_that_does_not_hash_to_its_digest():
    """A registry that serves, under a digest, a manifest that does not hash to it (the fake does
    so for a digest it was not given content for) or a config blob that does not hash to the digest
    the manifest names: not an answer (containers/image refuses both on a pull)."""
    with serve(FakeRegistry) as host:
        with pytest.raises(registry.RegistryError, match=f"served a manifest whose digest is not {DIGESTS[0]}"):
            registry.labels(f"{host}/ocl/os-image@{DIGESTS[0]}", auths(host))
        digest = FakeRegistry.push({BUILD_ID: "abc"})
        config = json.loads(FakeRegistry.stored[digest][0])["config"]["digest"]
        FakeRegistry.stored[config] = (FakeRegistry.config({BUILD_ID: "forged"}), "application/octet-stream")
        with pytest.raises(registry.RegistryError, match=f"served a config blob whose digest is not {config}"):
            registry.labels(f"{host}/ocl/os-image@{digest}", auths(host))


def test_labelled_reuses_only_our_label_for_that_build_id():
    image = f"{F.REPO}@{DIGESTS[0]}"
    assert images.labelled(image, {BUILD_ID: "abc"}, "abc") == images.Lookup(image, True)
    assert images.labelled(image, None, "abc") == images.Lookup(image, False)
    assert images.labelled(image, {}, "abc").found is False
    assert images.labelled(image, {BUILD_ID: "abd"}, "abc").detail.endswith("label is 'abd', not abc")


def test_a_registry_that_cannot_be_asked_never_blocks_the_pool(live_cli):
    with serve(FakeRegistry, manifests=set()) as host:
        items, _, image_a = a_then_b(live_cli, host)
    # the registry is down now
    code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.PENDING and len(build_objects(after)) == 1
    assert a[A.MESSAGE].startswith(f"building again: could not ask the registry for {image_a}: ")
    assert "refused" in a[A.MESSAGE].lower()


class ForbiddingRegistry(FakeRegistry):
    """Knows the credentials but lets them read nothing: 403, as a registry whose access rules give
    the push Secret no pull answers (the real docker-registry's htpasswd auth only answers 401)."""

    def _authorised(self) -> bool:
        self.send_response(403)
        return False


def test_a_registry_that_forbids_the_read_is_a_reason_to_build(live_cli):
    with serve(ForbiddingRegistry, manifests=set()) as host:
        items, id_a, image_a = a_then_b(live_cli, host, lambda build_id: ForbiddingRegistry.push({BUILD_ID: build_id}))
        code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    assert (a[A.STATE], len(build_objects(after))) == (A.PENDING, 1)
    assert a[A.MESSAGE] == (f"building again: could not ask the registry for {image_a}: {image_a}: the registry "
                            "answered 403 Forbidden")


def test_wrong_credentials_are_a_reason_to_build_not_a_secret_to_print():
    with serve(FakeRegistry) as host:
        image = f"{host}/ocl/os-image@{DIGESTS[0]}"
        assert registry.exists(image, auths(host)) is True
        assert registry.exists(f"{host}/ocl/os-image@sha256:{'9' * 64}", auths(host)) is False
        with pytest.raises(registry.RegistryError) as err:
            registry.exists(image, auths(host, "pusher:wrong"))
    assert "401" in str(err.value) and "wrong" not in str(err.value)


# --- the history: which build id produced which image -----------------------------------------

def test_the_history_maps_build_ids_to_images_and_reads_old_entries():
    old = f"r.example.com/os@{DIGESTS[2]}"
    pool = F.pool(annotations={A.IMAGES: f"aaa=r.example.com/os@{DIGESTS[0]} {old}"})
    assert images.entries(pool) == [("aaa", f"r.example.com/os@{DIGESTS[0]}"), ("", old)]
    assert images.produced(pool, "aaa") == f"r.example.com/os@{DIGESTS[0]}"
    assert images.produced(pool, "") is None                  # an old entry's id is unknown
    assert images.produced(pool, "bbb") is None
    # reusing moves the entry to the front; an old bare entry of the same image is dropped
    assert images.recorded(pool, "ccc", old) == f"ccc={old} aaa=r.example.com/os@{DIGESTS[0]}"
    assert images.recorded(pool, "aaa", f"r.example.com/os@{DIGESTS[0]}").split()[0] == \
        f"aaa=r.example.com/os@{DIGESTS[0]}"


def test_pruning_never_deletes_an_image_a_kept_entry_maps_to():
    x, y = (f"r.example.com/os@{d}" for d in DIGESTS[:2])
    pool = F.pool(annotations={A.IMAGES: f"new={x} mid={y} old={x}", A.IMAGE: "r.example.com/os@" + DIGESTS[3]})
    (item,) = images.plan([pool], [], keep=1)
    assert item.delete == (y,)                       # x is also the kept entry `new`'s image
    assert images.remaining(pool, [y]) == f"new={x} old={x}"


def test_decide_reuses_only_what_the_registry_has():
    obs = lifecycle.Observation(None, False, False, None, True)
    assert lifecycle.decide(obs) is lifecycle.Transition.START
    from dataclasses import replace
    assert lifecycle.decide(replace(obs, reusable=True)) is lifecycle.Transition.REUSE


def test_a_build_id_never_built_is_not_a_candidate():
    from reconcile.imagebuild import settings as S
    found = S.read(F.NS, {"on-cluster-build-config": F.build_config(), "machine-config-osimageurl": F.osimageurl()})
    pool = F.pool(annotations={A.IMAGES: f"someotherid=r.example.com/os@{DIGESTS[0]}", A.ARCH: "amd64"})
    (d,) = lifecycle.decide_cluster(found, [pool], [], machineconfigs={"rendered-worker-1": F.machineconfig("rendered-worker-1")})
    assert d.transition is lifecycle.Transition.START and d.candidate is None
    pool["metadata"]["annotations"][A.IMAGES] = f"{d.inputs.build_id}={F.REPO}@{DIGESTS[0]}"     # of the configured repository
    (d,) = lifecycle.decide_cluster(found, [pool], [], machineconfigs={"rendered-worker-1": F.machineconfig("rendered-worker-1")})
    assert d.candidate == f"{F.REPO}@{DIGESTS[0]}"
    gone = lifecycle.with_lookup(d, images.Lookup(d.candidate, False))
    assert gone.transition is lifecycle.Transition.START
    plan = lifecycle.act(gone, F.NOW, F.machineconfig(d.inputs.rendered_config))
    assert plan.message == f"building again: {F.REPO}@{DIGESTS[0]} is gone from the registry"
    assert [a.obj["kind"] for a in plan.actions if a.verb == "create"].count("ConfigMap") == 2


# --- with signing on: reuse checks the signature (issue 41, docs/signing.md "Reuse and rollback") ---

def signing_on(items, pem: bytes):
    """Signing turned on with a key Secret whose cosign.pub is `pem`."""
    from tests.unit.test_signing_plan import key_secret
    items = copy.deepcopy(items) + [key_secret("cosign-key", pem)]
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"][
        "imageSigningKeySecretName"] = "cosign-key"
    return items


@pytest.mark.parametrize("case", ["ours", "unsigned", "other-key"])
def test_a_live_rollback_with_signing_on_reuses_only_an_image_a_current_key_signed(live_cli, case):
    """The registry has A's image with A's build-id label (which anyone who may push can write).
    Signed with the current key: REUSE, recorded signed, no signing Pod. Unsigned, or signed with
    another key: built again, and no signing Pod signs what was found."""
    from reconcile.imagebuild import signing
    from tests.support.fakeregistry import cosign_signature, key_pair
    key, pem = key_pair()
    other, _ = key_pair()
    with serve(FakeRegistry, manifests=set()) as host:
        items, id_a, image_a = a_then_b(live_cli, host, lambda build_id: FakeRegistry.push({BUILD_ID: build_id}))
        digest = image_a.split("@")[1]
        repo = image_a.split("@")[0]
        if case != "unsigned":
            FakeRegistry.sign(digest, cosign_signature(key if case == "ours" else other, digest, repo))
        FakeRegistry.gets.clear()
        code, after, err = live_cli.run(switch(signing_on(items, pem), "rendered-worker-1"))
        gets = list(FakeRegistry.gets)
    assert code == 0, err
    a = F.the_pool(after)["metadata"]["annotations"]
    pods = [o["metadata"]["name"] for o in F.owned(after, "worker") if o["kind"] == "Pod"]
    sig_tag = f"/v2/ocl/os-image/manifests/sha256-{digest[7:]}.sig"
    # the manifest and its config (the label), then the signature tag and, if any, its payload blob
    assert gets[:3] == [f"/v2/ocl/os-image/manifests/{digest}", gets[1], sig_tag] and len(gets) == 3 + (case != "unsigned")
    if case == "ours":
        assert (a[A.STATE], a[A.IMAGE]) == (A.SUCCEEDED, image_a)
        assert a[A.SIGNED] == f"{image_a}={signing.fingerprint(pem)}"
        assert pods == []
        return
    why = {"unsigned": f"it has no cosign signature ({repo}:sha256-{digest[7:]}.sig)",
           "other-key": "none of its 1 signature(s) verifies with cosign-key ("}[case]
    assert a[A.STATE] == A.PENDING and A.SIGNED not in a and a[A.IMAGE] != image_a
    assert a[A.MESSAGE].startswith(f"building again: {image_a} is not reused: {why}")
    assert [p.split("-")[1] for p in pods] == ["build"]           # a build of A's id, no signing Pod
    (obj,) = build_objects(after)
    assert obj["metadata"]["labels"][BUILD_ID] == id_a


def test_with_signing_off_a_rollback_reads_no_signature(live_cli):
    """The signature is read only with signing on, and only for an image a reuse considers."""
    with serve(FakeRegistry, manifests=set()) as host:
        items, _, image_a = a_then_b(live_cli, host, lambda build_id: FakeRegistry.push({BUILD_ID: build_id}))
        FakeRegistry.gets.clear()
        code, after, err = live_cli.run(switch(items, "rendered-worker-1"))
        gets = list(FakeRegistry.gets)
    assert code == 0, err
    assert F.the_pool(after)["metadata"]["annotations"][A.IMAGE] == image_a
    assert len(gets) == 2 and not any(g.endswith(".sig") for g in gets)
