"""Issue 31 item 3 on the real docker-registry: a pool's image history (an annotation anyone who may
patch pools can write) is not a source of images. Two registries serve TLS with a CA made here
(passed as --registry-ca) and answer only the htpasswd user of the push secret. The reconciler runs
through the CLI against the API-server stand-in (a snapshot run never asks a registry), and each
registry's access log says what it was asked. Images are pushed through the registry API
(push_image), not built: what is tested is what the run does with an entry, and a failed build is
staged by setting the build Pod's phase, as a kubelet would.

The refusals, each alone: an entry in another repository of our registry, or on another registry,
is never asked about; an image of our repository without our build-id label, or with another build
id's, is not reused; a registry that refuses the credentials or has lost the manifest or its config
is a reason to build; a registry that serves content other than the digest names is not trusted;
pruning deletes only our repository's superseded images. And the genuine entry: reused with one GET
of its manifest and one of its config."""

from __future__ import annotations

import base64
import copy
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

import kubelet  # examples/kubelet.py
import pytest

from reconcile.contract import annotations as A
from reconcile.contract import naming
from tests.conftest import ApiCli
from tests.support import factory as F
from tests.support import realbuild as R

pytestmark = pytest.mark.realbuild
USER, PASSWORD = "pusher", "s3cret-push"
REPO = "ocl/os-image"
BUILD_ID = naming.BUILD_ID_LABEL
MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass
class Registries:
    ours: R.Registry            # finalImagePullspec's
    other: R.Registry           # another registry host, the same credentials
    ca: R.TestCA


@pytest.fixture(scope="module")
def regs(tmp_path_factory):
    R.require_registry()
    root = tmp_path_factory.mktemp("trust")
    ca = R.TestCA(root / "ca")
    users = R.htpasswd(root / "htpasswd", USER, PASSWORD)
    ours = R.Registry(root, tls=ca, htpasswd=users)
    try:
        other = R.Registry(root, tls=ca, htpasswd=users)
        try:
            yield Registries(ours, other, ca)
        finally:
            other.stop()
    finally:
        ours.stop()


@pytest.fixture
def live(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return ApiCli(tmp_path, capsys)


def cluster(regs: Registries, password: str = PASSWORD) -> list[dict]:
    """The worker pool opted in; images go to our registry, whose credentials the push secret has."""
    auth = {regs.ours.host: {"auth": base64.b64encode(f"{USER}:{password}".encode()).decode()}}
    return F.cluster(settings=[F.build_config(finalImagePullspec=f"{regs.ours.host}/{REPO}:latest"),
                               F.osimageurl(), F.secret("pull-secret", payload={"auths": auth}),
                               F.secret("push-secret", payload={"auths": auth})])


def push(reg: R.Registry, repo: str, marker: str, labels: dict[str, str] | None = None) -> str:
    """A small image pushed with the registry's credentials; its digested reference."""
    with R.basic_auth(USER, PASSWORD):
        return f"{reg.host}/{repo}@{R.push_image(reg, repo, marker, labels)}"


def fetch(reg: R.Registry, path: str) -> tuple[int, bytes]:
    """(status, body) of an authorised GET, as the test sees the registry (not the reconciler)."""
    request = urllib.request.Request(f"{reg.url}{path}", headers={
        "Accept": MANIFEST, "Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
    try:
        with urllib.request.urlopen(request, context=reg.context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def manifest(image: str, reg: R.Registry) -> tuple[bytes, str]:
    """The manifest the registry holds for a digested image, and its config's digest."""
    name, digest = image.split("/", 1)[1].split("@")
    status, body = fetch(reg, f"/v2/{name}/manifests/{digest}")
    assert status == 200, image
    return body, json.loads(body)["config"]["digest"]


def wanted_build_id(live: ApiCli, items: list[dict]) -> str:
    """The build id the pool needs (its first run's build Pod says it)."""
    code, after, err = live.run(copy.deepcopy(items))
    assert code == 0, err
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    return pod["metadata"]["labels"][BUILD_ID]


def with_history(items: list[dict], history: str, **annotations: str) -> list[dict]:
    items = copy.deepcopy(items)
    F.the_pool(items)["metadata"].setdefault("annotations", {}).update({A.IMAGES: history, **annotations})
    return items


@dataclass
class Run:
    code: int
    after: list[dict]
    err: str
    ours: list[tuple[str, str, int]]        # what each registry was asked during the run
    other: list[tuple[str, str, int]]

    @property
    def ann(self) -> dict[str, str]:
        return F.the_pool(self.after)["metadata"]["annotations"]

    def builds(self) -> list[dict]:
        return [o for o in F.owned(self.after) if o["kind"] == "Pod"]


def run(live: ApiCli, regs: Registries, items: list[dict], *extra: str) -> Run:
    marks = len(R.requests_seen(regs.ours)), len(R.requests_seen(regs.other))
    code, after, err = live.run(items, "--registry-ca", str(regs.ca.ca), *extra)
    return Run(code, after, err, R.requests_seen(regs.ours)[marks[0]:], R.requests_seen(regs.other)[marks[1]:])


def assert_rebuilt(r: Run, build_id: str, attempt: str = "1") -> None:
    """Not reused: a build of that id started, the pool has no image, no BuildReused Event."""
    assert r.code == 0, r.err
    (pod,) = r.builds()
    assert pod["metadata"]["labels"][BUILD_ID] == build_id
    assert (r.ann[A.STATE], r.ann[A.ATTEMPT]) == (A.PENDING, attempt)
    assert A.IMAGE not in r.ann
    assert "BuildReused" not in [e["reason"] for e in F.find(r.after, "Event")]


def test_a_genuine_entry_is_reused_with_one_get_of_its_manifest_and_one_of_its_config(regs, live):
    items = cluster(regs)
    build_id = wanted_build_id(live, items)
    image = push(regs.ours, REPO, "genuine", {BUILD_ID: build_id})
    _, config = manifest(image, regs.ours)
    r = run(live, regs, with_history(items, f"{build_id}={image}"))
    assert r.code == 0, r.err
    assert (r.ann[A.STATE], r.ann[A.IMAGE], r.builds()) == (A.SUCCEEDED, image, []), r.err
    assert r.ann[A.MESSAGE] == f"reused {image} of build {build_id}"
    digest = image.split("@")[1]
    assert r.ours == [("GET", f"/v2/{REPO}/manifests/{digest}", 200), ("GET", f"/v2/{REPO}/blobs/{config}", 200)]
    assert r.other == []


def test_an_entry_in_another_repository_of_our_registry_is_never_asked_about(regs, live):
    """`<build id>=<our registry>/other-team/os-image@...`, labelled for that very build id: not our
    repository, so not a candidate; the registry is not asked; the run says why once, as a warning."""
    items = cluster(regs)
    build_id = wanted_build_id(live, items)
    image = push(regs.ours, "other-team/os-image", "other-repository", {BUILD_ID: build_id})
    r = run(live, regs, with_history(items, f"{build_id}={image}"))
    assert_rebuilt(r, build_id)
    said = f"not reused: {image} is not in the configured repository {regs.ours.host}/{REPO}"
    assert r.err.count(said) == 1 and f"WARNING pool worker: {said}" in r.err, r.err
    assert r.ours == [] and r.other == []


def test_an_entry_on_another_registry_is_never_asked_about_when_the_build_fails(regs, live):
    """Row 3 of the issue as it was tried: the entry names another registry (the same repository
    path, labelled for the build id), then the build fails for a transient reason (the Pod is
    evicted): the retry builds again and neither registry is asked."""
    items = cluster(regs)
    code, started, err = live.run(copy.deepcopy(items))
    assert code == 0, err
    (pod,) = [o for o in F.owned(started) if o["kind"] == "Pod"]
    build_id = pod["metadata"]["labels"][BUILD_ID]
    kubelet.set_phase(pod, "Evicted")
    image = push(regs.other, REPO, "other-registry", {BUILD_ID: build_id})
    F.the_pool(started)["metadata"]["annotations"][A.IMAGES] = f"{build_id}={image}"
    r = run(live, regs, started)
    assert_rebuilt(r, build_id, attempt="2")
    said = f"not reused: {image} is not in the configured repository {regs.ours.host}/{REPO}"
    assert r.err.count(said) == 1 and f"WARNING pool worker: {said}" in r.err, r.err
    assert r.ours == [] and r.other == []


@pytest.mark.parametrize("labels, why", [
    ({}, f"its image config has no {BUILD_ID} label"),
    ({BUILD_ID: "someone-else"}, f"its image config's {BUILD_ID} label is 'someone-else', not {{build_id}}"),
], ids=["no-label", "another-build-id"])
def test_an_image_of_our_repository_not_labelled_for_that_build_id_is_not_reused(regs, live, labels, why):
    items = cluster(regs)
    build_id = wanted_build_id(live, items)
    image = push(regs.ours, REPO, f"labels-{len(labels)}", labels)
    _, config = manifest(image, regs.ours)
    r = run(live, regs, with_history(items, f"{build_id}={image}"))
    assert_rebuilt(r, build_id)
    assert r.ann[A.MESSAGE] == f"building again: {image} is not reused: " + why.format(build_id=build_id)
    assert r.err.count(f"{image} is not reused") == 1, r.err
    assert r.ours == [("GET", f"/v2/{REPO}/manifests/{image.split('@')[1]}", 200),
                      ("GET", f"/v2/{REPO}/blobs/{config}", 200)]


WRONG = "not-the-push-password"


def _wrong_credentials(regs, image, items):
    return cluster(regs, password=WRONG), (401,)


def _manifest_deleted(regs, image, items):
    with R.basic_auth(USER, PASSWORD):
        R.delete_manifest(regs.ours, REPO, image.split("@")[1])
    return items, (404,)


def _config_deleted(regs, image, items):
    _, config = manifest(image, regs.ours)
    with R.basic_auth(USER, PASSWORD):
        R.delete_blob(regs.ours, REPO, config)
    return items, (200, 404)


@pytest.mark.parametrize("break_it, why", [
    (_wrong_credentials, "could not ask the registry for {image}: {image}: the registry answered 401 Unauthorized"),
    (_manifest_deleted, "{image} is gone from the registry"),
    (_config_deleted, "could not ask the registry for {image}: {image}: the registry answered 404 to GET of its "
                      "config {config}"),
], ids=["401-wrong-credentials", "404-manifest-deleted", "404-config-deleted"])
def test_a_registry_that_refuses_or_lost_the_image_is_a_reason_to_build(regs, live, break_it, why):
    """The genuine image (our repository, our label for that build id), but the registry cannot
    give it: the pool builds, saying why, and the run does not fail. (docker-registry's htpasswd
    auth answers 401, never 403: tests/standin/test_reuse.py has a registry that answers 403.)"""
    items = cluster(regs)
    build_id = wanted_build_id(live, items)
    image = push(regs.ours, REPO, f"lost-{break_it.__name__}", {BUILD_ID: build_id})
    _, config = manifest(image, regs.ours)
    items, statuses = break_it(regs, image, items)
    r = run(live, regs, with_history(items, f"{build_id}={image}"))
    assert_rebuilt(r, build_id)
    assert r.ann[A.MESSAGE] == "building again: " + why.format(image=image, config=config)
    assert [status for _, _, status in r.ours] == list(statuses)
    assert WRONG not in r.err and WRONG not in json.dumps(r.after)
    assert base64.b64encode(f"{USER}:{WRONG}".encode()).decode() not in r.err


def _tamper_config(regs, build_id, unlabelled):
    """The unlabelled image's config blob, as stored, replaced by one that carries our label."""
    _, config = manifest(unlabelled, regs.ours)
    path = R.blob_file(regs.ours, config)
    forged = json.loads(path.read_text())
    forged["config"]["Labels"][BUILD_ID] = build_id
    path.write_text(json.dumps(forged))
    return "the registry served a config blob whose digest is not {config}"


def _tamper_manifest(regs, build_id, unlabelled):
    """The unlabelled image's manifest, as stored, replaced by a labelled image's manifest."""
    labelled = push(regs.ours, REPO, "tamper-labelled", {BUILD_ID: build_id})
    body, _ = manifest(labelled, regs.ours)
    R.blob_file(regs.ours, unlabelled.split("@")[1]).write_bytes(body)
    return "the registry served a manifest whose digest is not {digest}"


@pytest.mark.parametrize("tamper", [_tamper_config, _tamper_manifest], ids=["config", "manifest"])
def test_a_registry_that_serves_other_content_than_the_digest_is_not_trusted(regs, live, tamper):
    """The registry's storage is changed under an unlabelled image of our repository (as a broken
    disk, a poisoned mirror or a registry that lies would serve it): what it then serves under that
    digest carries our label, but is not the image the digest names, which the nodes would get.
    containers/image checks both digests on a pull; so does the reuse check."""
    items = cluster(regs)
    build_id = wanted_build_id(live, items)
    unlabelled = push(regs.ours, REPO, f"tamper-{tamper.__name__}")
    _, config = manifest(unlabelled, regs.ours)
    why = tamper(regs, build_id, unlabelled).format(config=config, digest=unlabelled.split("@")[1])
    r = run(live, regs, with_history(items, f"{build_id}={unlabelled}"))
    assert_rebuilt(r, build_id)
    assert r.ann[A.MESSAGE].startswith(f"building again: could not ask the registry for {unlabelled}: "), r.ann
    assert why in r.ann[A.MESSAGE], r.ann[A.MESSAGE]


def test_pruning_deletes_only_our_repositorys_superseded_images(regs, live):
    """Row 4 of the issue: entries of other repositories on our registry (which the push credentials
    cover) and of another registry are written into the history; `run --keep-images 1` deletes our
    superseded image and drops the others from the history, deleting none of them, with one warning
    each. The next run has nothing more to say."""
    new = push(regs.ours, REPO, "prune-new")
    old = push(regs.ours, REPO, "prune-old")
    victim = push(regs.ours, "victim/app", "prune-victim")
    db = push(regs.ours, "other-team/db", "prune-db")
    far = push(regs.other, REPO, "prune-far")
    history = f"new={new} old={old} old1={victim} old2={db} old3={far}"
    r = run(live, regs, with_history(cluster(regs), history, **{A.IMAGE: new}), "--keep-images", "1")
    assert r.code == 0, r.err
    assert r.ann[A.IMAGES] == f"new={new}"
    assert [(m, p) for m, p, _ in r.ours] == [("DELETE", f"/v2/{REPO}/manifests/{old.split('@')[1]}")]
    assert r.other == []
    for image, reg, status in ((old, regs.ours, 404), (new, regs.ours, 200), (victim, regs.ours, 200),
                               (db, regs.ours, 200), (far, regs.other, 200)):
        name, digest = image.split("/", 1)[1].split("@")
        assert fetch(reg, f"/v2/{name}/manifests/{digest}")[0] == status, image
    for image in (victim, db, far):
        said = f"image {image} is not in the configured repository {regs.ours.host}/{REPO}"
        assert r.err.count(said) == 1 and f"WARNING pool worker: {said}" in r.err, r.err
    assert f"deleted image {old}" in r.err and "1 images deleted" in r.err.splitlines()[-1]
    again = run(live, regs, r.after, "--keep-images", "1")
    assert again.code == 0 and "not in the configured repository" not in again.err, again.err
    assert again.ours == [] and again.ann[A.IMAGES] == f"new={new}"
