"""The render-controller imitation (tests/support/mcorender.py) against what the upstream code says. Every
expected value below is read off openshift/machine-config-operator (paths and functions in the
comments; commits in mcorender's docstring), not computed by the module under test."""

from __future__ import annotations

import copy

import pytest

from tests.support import mcorender as R

BASE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "b" * 64
CUSTOM = "registry.example.com/ocl/worker@sha256:" + "c" * 64
INFRA_IMAGE = "registry.example.com/ocl/infra@sha256:" + "d" * 64
ROLE = "machineconfiguration.openshift.io/role"
GEN = "machineconfiguration.openshift.io/generated-by-controller-version"


def mc(name, role="worker", labels=None, generated=None, **spec):
    md = {"name": name, "labels": {ROLE: role, **(labels or {})} if role is not None else labels}
    if generated is not None:
        md["annotations"] = {GEN: generated}
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": md, "spec": spec}


def osimageurl_mc(pool, image):
    """What the product will write: ocl-osimageurl-<pool>, spec only osImageURL."""
    obj = mc(f"ocl-osimageurl-{pool}", role=pool, osImageURL=image)
    obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "ocl-reconciler"
    return obj


def pool(name="worker", roles=None, expressions=None, stream=None, match_labels=True):
    sel = {}
    if match_labels and not expressions:
        sel["matchLabels"] = {ROLE: name}
    if expressions:
        sel["matchExpressions"] = expressions
    if roles:
        sel = {"matchExpressions": [{"key": ROLE, "operator": "In", "values": roles}]}
    spec = {"machineConfigSelector": sel, "configuration": {"name": ""}}
    if stream:
        spec["osImageStream"] = {"name": stream}
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec, "status": {"machineCount": 3}}


def names(objs):
    return [o["metadata"]["name"] for o in objs]


def file(path, data):
    return {"path": path, "mode": 420, "contents": {"source": f"data:,{data}"}}


def ign(*files):
    return {"ignition": {"version": "3.4.0"}, "storage": {"files": list(files)}}


# ordering: helpers.go MergeMachineConfigs splits role=worker from the rest, sorts each by name and
# puts worker first; render_controller.go syncMachineConfigPool sorts the listed MCs by name.
@pytest.mark.parametrize("given, merge_order", [
    (["99-infra", "00-worker", "50-infra", "01-worker"], ["00-worker", "01-worker", "50-infra", "99-infra"]),
    (["00-infra", "zz-worker"], ["zz-worker", "00-infra"]),        # worker first even if it sorts last
    (["b-infra", "a-infra"], ["a-infra", "b-infra"]),
])
def test_merge_order_worker_first_then_by_name(given, merge_order):
    objs = [mc(n, role="worker" if n.endswith("worker") else "infra") for n in given]
    assert names(R.merge_order(objs)) == merge_order


def test_merge_order_refuses_unlabelled_machineconfig():
    # helpers.go: `Cannot find label in MachineConfig %s` when Labels is nil
    with pytest.raises(R.RenderError, match="Cannot find label in MachineConfig bare"):
        R.merge_order([mc("bare", role=None)])


# osImageURL: starts from the base, the LAST MachineConfig in merge order that sets it wins
# (helpers.go loop over configs), generated ones skipped (PR #5488).
@pytest.mark.parametrize("case, objs, expected", [
    ("nothing sets it: the base", [mc("00-worker")], BASE),
    ("worker's own", [mc("00-worker"), osimageurl_mc("worker", CUSTOM)], CUSTOM),
    ("infra inherits worker's",
     [mc("00-worker"), osimageurl_mc("worker", CUSTOM), mc("50-infra", role="infra")], CUSTOM),
    ("infra's wins over worker's although it sorts earlier",
     [osimageurl_mc("worker", CUSTOM), mc("00-infra-image", role="infra", osImageURL=INFRA_IMAGE)],
     INFRA_IMAGE),
    ("later name wins within a role",
     [mc("10-a", osImageURL=CUSTOM), mc("20-b", osImageURL=INFRA_IMAGE)], INFRA_IMAGE),
    ("empty string does not override", [mc("10-a", osImageURL=CUSTOM), mc("20-b", osImageURL="")], CUSTOM),
    ("generated one ignored",
     [mc("00-worker", generated="ocl-test", osImageURL="quay.io/old@sha256:" + "0" * 64)], BASE),
    ("generated one after a user's ignored",
     [mc("10-user", osImageURL=CUSTOM), mc("99-worker-generated-kubelet", generated="ocl-test",
                                           osImageURL=BASE)], CUSTOM),
])
def test_os_image_url_last_non_generated_wins(case, objs, expected):
    infra = pool("infra", roles=["worker", "infra"])
    assert R.merge(infra, objs, BASE)["osImageURL"] == expected, case


def test_custom_pool_selecting_worker_and_infra():
    worker_mcs = [mc("00-worker"), osimageurl_mc("worker", CUSTOM)]
    infra = pool("infra", roles=["worker", "infra"])
    r1 = R.render(infra, worker_mcs + [mc("50-infra", role="infra")], BASE)
    assert r1["spec"]["osImageURL"] == CUSTOM
    r2 = R.render(infra, worker_mcs + [mc("50-infra", role="infra"), osimageurl_mc("infra", INFRA_IMAGE)],
                  BASE)
    assert r2["spec"]["osImageURL"] == INFRA_IMAGE
    # the worker pool itself never selects the infra MC
    assert R.render(pool("worker"), worker_mcs + [osimageurl_mc("infra", INFRA_IMAGE)], BASE)[
        "spec"]["osImageURL"] == CUSTOM


# render_controller.go generateRenderedMachineConfig: OSImageURLOverriddenKey = "true" iff the merged
# osImageURL != GetBaseImageContainer; generated-by and release-image-version always; owner = controller
# ref to the pool (metav1.NewControllerRef: controller and blockOwnerDeletion true); no labels.
@pytest.mark.parametrize("objs, overridden", [
    ([mc("00-worker")], False),
    ([mc("00-worker"), osimageurl_mc("worker", CUSTOM)], True),
    ([mc("00-worker"), osimageurl_mc("worker", BASE)], False),       # set, but equal to the base
])
def test_rendered_metadata(objs, overridden):
    out = R.render(pool(), objs, BASE, controller_version="v-abc", release_version="4.21.0")
    md = out["metadata"]
    assert md["annotations"].get("machineconfiguration.openshift.io/os-image-url-overridden") == (
        "true" if overridden else None)
    assert md["annotations"][GEN] == "v-abc"
    assert md["annotations"]["machineconfiguration.openshift.io/release-image-version"] == "4.21.0"
    assert md["ownerReferences"] == [{"apiVersion": "machineconfiguration.openshift.io/v1",
                                      "kind": "MachineConfigPool", "name": "worker", "uid": "uid-worker",
                                      "controller": True, "blockOwnerDeletion": True}]
    assert "labels" not in md
    assert out["kind"] == "MachineConfig"


# hash.go getMachineConfigHashedName: "rendered-%s-%x" of md5 (16 bytes, 32 hex) over salt + the
# merged Spec only, so metadata (names) does not count and any spec change does.
def test_rendered_name_is_a_function_of_the_merged_spec():
    a = R.render(pool(), [mc("00-worker", kernelArguments=["x"]), osimageurl_mc("worker", CUSTOM)], BASE)
    same = R.render(pool(), [mc("00-worker", kernelArguments=["x"]), osimageurl_mc("worker", CUSTOM)], BASE)
    renamed = R.render(pool(), [mc("01-other", kernelArguments=["x"]), mc("02-image", osImageURL=CUSTOM)],
                       BASE)
    image = R.render(pool(), [mc("00-worker", kernelArguments=["x"]), osimageurl_mc("worker", INFRA_IMAGE)],
                     BASE)
    assert a["metadata"]["name"] == same["metadata"]["name"] == renamed["metadata"]["name"]
    assert image["metadata"]["name"] != a["metadata"]["name"]
    prefix, digest = a["metadata"]["name"].rsplit("-", 1)
    assert prefix == "rendered-worker" and len(digest) == 32 and int(digest, 16) >= 0
    assert R.rendered_name("infra", a["spec"]).startswith("rendered-infra-")
    assert R.rendered_name("worker", a["spec"]) == a["metadata"]["name"]


def test_rendered_name_ignores_input_dict_order():
    spec = R.merge(pool(), [mc("00-worker", kernelArguments=["a"], fips=False)], BASE)
    shuffled = dict(reversed(list(spec.items())))
    assert R.rendered_name("worker", spec) == R.rendered_name("worker", shuffled)


# kernelArguments: helpers.go `kargs = append(kargs, cfg.Spec.KernelArguments...)` in merge order
# (no dedupe at 19ba3dda); extensions likewise appended.
def test_kernel_arguments_and_extensions_concatenated_in_merge_order():
    objs = [mc("50-infra", role="infra", kernelArguments=["c", "a"], extensions=["usbguard"]),
            mc("10-worker", kernelArguments=["a", "b"], extensions=["wasm"]),
            mc("20-worker", kernelArguments=["a"], extensions=["wasm"])]
    spec = R.merge(pool("infra", roles=["worker", "infra"]), objs, BASE)
    assert spec["kernelArguments"] == ["a", "b", "a", "c", "a"]
    assert spec["extensions"] == ["wasm", "wasm", "usbguard"]


# fips: any MC; kernelType: the last realtime/64k-pages wins, else "default"; kernel-devel refused
# with a non-default kernel: `installing kernel-devel extension is not supported with kernelType: %s`.
@pytest.mark.parametrize("objs, fips, kernel", [
    ([mc("a")], False, "default"),
    ([mc("a", fips=True), mc("b")], True, "default"),
    ([mc("a", kernelType="realtime"), mc("b", kernelType="default")], False, "realtime"),
    ([mc("a", kernelType="realtime"), mc("b", kernelType="64k-pages")], False, "64k-pages"),
])
def test_fips_and_kernel_type(objs, fips, kernel):
    spec = R.merge(pool(), objs, BASE)
    assert (spec["fips"], spec["kernelType"]) == (fips, kernel)


def test_kernel_devel_with_realtime_refused():
    with pytest.raises(R.RenderError, match="installing kernel-devel extension is not supported with "
                                            "kernelType: realtime"):
        R.merge(pool(), [mc("a", kernelType="realtime"), mc("b", extensions=["kernel-devel"])], BASE)


def test_invalid_kernel_type_refused():
    # helpers.go ValidateMachineConfig: `kernelType=%s is invalid`
    with pytest.raises(R.RenderError, match="kernelType=rt is invalid"):
        R.render(pool(), [mc("a", kernelType="rt")], BASE)


# Ignition: helpers_test.go TestMergeMachineConfigs, "custom pool configuration can overwrite base
# pool configuration": aaa/bbb (worker) set /etc/test1, ddd (worker) and ccc (infra) set /etc/test2;
# the result has bbb's test1 and ccc's test2, both overwrite true, in that order.
def test_ignition_files_custom_pool_overrides_worker():
    objs = [mc("ccc", role="infra", config=ign(file("/etc/test2", "new"))),
            mc("aaa", config=ign(file("/etc/test1", "old"))),
            mc("bbb", config=ign(file("/etc/test1", "new"))),
            mc("ddd", config=ign(file("/etc/test2", "old")))]
    cfg = R.merge(pool("infra", roles=["worker", "infra"]), objs, BASE)["config"]
    assert cfg["ignition"]["version"] == "3.5.0"       # constants.go InternalMCOIgnitionVersion at 7ff337a4
    assert cfg["storage"]["files"] == [
        {"path": "/etc/test1", "mode": 420, "contents": {"source": "data:,new"}, "overwrite": True},
        {"path": "/etc/test2", "mode": 420, "contents": {"source": "data:,new"}, "overwrite": True}]


def test_ignition_users_merged_by_name():
    # helpers_test.go TestMergeMachineConfigs: "passwd" (passwordHash) then two "ssh" MCs (5678, then
    # 1234, stable order) give core with sshAuthorizedKeys [5678, 1234] and the password hash
    def users(**user):
        return {"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": "core", **user}]}}
    objs = [mc("ssh", config=users(sshAuthorizedKeys=["5678"])),
            mc("passwd", config=users(passwordHash="testpass")),
            mc("ssh", config=users(sshAuthorizedKeys=["1234"]))]
    cfg = R.merge(pool(), objs, BASE)["config"]
    assert cfg["passwd"]["users"] == [{"name": "core", "passwordHash": "testpass",
                                       "sshAuthorizedKeys": ["5678", "1234"]}]


def test_empty_configs_give_the_internal_version_only():
    # helpers.go: configs[0] without a config starts from {ignition: {version: MaxVersion}} (v3_5)
    assert R.merge(pool(), [mc("a"), mc("b")], BASE)["config"] == {"ignition": {"version": "3.5.0"}}


def test_a_later_uncompressed_rewrite_clears_an_earlier_gzip():
    # ../shared/reference/mco-render/README.md: a later MachineConfig that rewrites a file without
    # compression clears an earlier gzip
    zipped = {"path": "/etc/a", "mode": 420, "contents": {"source": "data:;base64,H4sI", "compression": "gzip"}}
    objs = [mc("10-a", config=ign(zipped)), mc("20-a", config=ign(file("/etc/a", "plain")))]
    assert R.merge(pool(), objs, BASE)["config"]["storage"]["files"] == [
        {"path": "/etc/a", "mode": 420, "contents": {"source": "data:,plain"}, "overwrite": True}]
    # a later entry that does not rewrite the contents keeps them, compression included
    objs = [mc("10-a", config=ign(zipped)), mc("20-a", config=ign({"path": "/etc/a", "mode": 384}))]
    assert R.merge(pool(), objs, BASE)["config"]["storage"]["files"][0]["contents"]["compression"] == "gzip"


STREAM_MSG = ("could not generate rendered MachineConfig: cannot override MachineConfig osImageURL and set "
              "MachineConfigPool spec.osImageStream.name simultaneously")     # results.json.gz, 7ff337a4


def test_os_image_stream_with_os_image_url_refused():
    # the merged osImageURL differs from the stream's image and the pool names the stream itself
    with pytest.raises(R.RenderError, match=STREAM_MSG):
        R.render(pool(stream="rhel-10"), [mc("00-worker"), osimageurl_mc("worker", CUSTOM)], BASE)
    # without an override the stream's base is used; a generated MC's osImageURL is no override
    out = R.render(pool(stream="rhel-10"), [mc("00-worker", generated="ocl-test", osImageURL=BASE)], BASE)
    assert out["spec"]["osImageURL"] == BASE
    # an MC naming the stream's own image is accepted (README: "a MachineConfig whose osImageURL equals the
    # stream's image is accepted")
    out = R.render(pool(stream="rhel-10"), [mc("00-worker"), osimageurl_mc("worker", BASE)], BASE)
    assert OVERRIDDEN not in out["metadata"]["annotations"]


OVERRIDDEN = "machineconfiguration.openshift.io/os-image-url-overridden"
STREAMS = {"kind": "OSImageStream", "metadata": {"name": "cluster"},
           "status": {"defaultStream": "rhel-9", "availableStreams": [
               {"name": "rhel-9", "osImage": BASE, "osExtensionsImage": "ext-9"},
               {"name": "rhel-10", "osImage": CUSTOM, "osExtensionsImage": "ext-10"}]}}


def test_a_custom_pool_naming_no_stream_inherits_workers():
    # GetEffectiveOSImageStreamName (helpers_test.go TestGetEffectiveOSImageStreamName): a custom pool
    # inherits worker's stream; worker and master never inherit; "" is the default stream
    worker, infra, master = pool("worker", stream="rhel-10"), pool("infra", roles=["worker", "infra"]), pool("master")
    pools = [worker, infra, master]
    assert R.stream_images(infra, pools, STREAMS, "cc-base", "cc-ext") == (CUSTOM, "ext-10")
    assert R.stream_images(master, pools, STREAMS, "cc-base", "cc-ext") == (BASE, "ext-9")
    assert R.stream_images(pool("infra", stream="rhel-9"), pools, STREAMS, "", "") == (BASE, "ext-9")
    # the OSStreams gate off (no OSImageStream read): the ControllerConfig's images
    assert R.stream_images(infra, pools, None, "cc-base", "cc-ext") == ("cc-base", "cc-ext")


def test_an_inheriting_pool_with_an_override_is_not_refused():
    # results.json.gz, stream-inherit-infra-ocl-worker: infra names no stream, inherits rhel-10 and worker's
    # osImageURL; it renders (overridden), only a pool naming a stream itself is refused
    infra = pool("infra", roles=["worker", "infra"])
    items = [pool("worker", stream="rhel-10"), infra, mc("00-worker"), osimageurl_mc("worker", INFRA_IMAGE),
             STREAMS]
    out = R.sync(items)
    got = {o["metadata"]["name"]: o for o in out if o["kind"] == "MachineConfigPool"}
    assert [c["status"] for c in got["worker"]["status"]["conditions"]] == ["True"]
    assert [c["status"] for c in got["infra"]["status"]["conditions"]] == ["False"]
    rendered = next(o for o in out if o["metadata"]["name"] == got["infra"]["spec"]["configuration"]["name"])
    assert (rendered["spec"]["osImageURL"], rendered["spec"]["baseOSExtensionsContainerImage"]) == (
        INFRA_IMAGE, "ext-10")
    assert rendered["metadata"]["annotations"][OVERRIDDEN] == "true"


@pytest.mark.parametrize("spec, phrase", [
    # results.json.gz, ign-bad-version
    ({"config": {"ignition": {"version": "9.9.9"}}},
     "parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5"),
    # Ignition's ErrPathRelative
    ({"config": ign(file("etc/relative", "x"))}, "path not absolute"),
    # helpers.go validateExtensions: `invalid extensions found: %v`
    ({"config": ign(), "extensions": ["usbguard", "zsh", "nope"]}, r"invalid extensions found: \[zsh nope\]"),
])
def test_validate_machineconfig_refuses(spec, phrase):
    with pytest.raises(R.RenderError, match=phrase):
        R.render(pool(), [mc("00-worker"), mc("50-bad", **spec)], BASE)


def test_extensions_without_a_config_are_not_validated():
    # results.json.gz, ext-invalid-nocfg: extension `nope` on an MC without spec.config renders
    out = R.render(pool(), [mc("00-worker"), mc("62-ext", extensions=["nope"])], BASE)
    assert out["spec"]["extensions"] == ["nope"]


def test_machineconfig_generated_by_another_controller_version_refused():
    # generateRenderedMachineConfig: `ignoring MC %s generated by older version %s (my version: %s)` (lower
    # case at 7ff337a4: results.json.gz, old-generated)
    with pytest.raises(R.RenderError, match=r"ignoring MC 00-worker generated by older version old "
                                            r"\(my version: ocl-test\)"):
        R.render(pool(), [mc("00-worker", generated="old")], BASE)


# selection: metav1.LabelSelectorAsSelector semantics; NotIn matches an absent key; a nil or empty
# selector selects nothing (getMachineConfigsForPool).
LABELLED = [mc("w", role="worker"), mc("i", role="infra"), mc("x", role="infra", labels={"extra": "1"}),
            mc("n", role=None, labels={"other": "y"})]


@pytest.mark.parametrize("expressions, selected", [
    ([{"key": ROLE, "operator": "In", "values": ["worker", "infra"]}], ["i", "w", "x"]),
    ([{"key": ROLE, "operator": "NotIn", "values": ["worker"]}], ["i", "n", "x"]),
    ([{"key": "extra", "operator": "Exists"}], ["x"]),
    ([{"key": "extra", "operator": "DoesNotExist"}], ["i", "n", "w"]),
    ([{"key": ROLE, "operator": "In", "values": ["infra"]}, {"key": "extra", "operator": "DoesNotExist"}],
     ["i"]),
])
def test_match_expressions(expressions, selected):
    assert names(R.select(pool("p", expressions=expressions), LABELLED)) == selected


def test_match_labels_and_expressions_are_anded():
    p = pool("infra")
    p["spec"]["machineConfigSelector"]["matchExpressions"] = [{"key": "extra", "operator": "Exists"}]
    assert names(R.select(p, LABELLED)) == ["x"]


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}])
def test_nil_or_empty_selector_selects_nothing(selector):
    p = pool()
    p["spec"]["machineConfigSelector"] = selector
    assert R.select(p, LABELLED) == []


def test_invalid_selector_refused():
    with pytest.raises(R.RenderError, match="values set can't be empty"):
        R.select(pool("p", expressions=[{"key": ROLE, "operator": "In", "values": []}]), LABELLED)


def test_no_machineconfigs_and_selecting_all():
    # syncMachineConfigPool: `no MachineConfigs found matching selector %v`; an empty selector is an event
    with pytest.raises(R.RenderError, match="no MachineConfigs found matching selector "
                                            "machineconfiguration.openshift.io/role=worker"):
        R.render(pool(), [mc("i", role="infra")], BASE)
    p = pool()
    p["spec"]["machineConfigSelector"] = {}
    with pytest.raises(R.RenderError) as err:
        R.render(p, LABELLED, BASE)
    assert err.value.selecting_all


# sync: syncGeneratedMachineConfig creates the rendered MC if absent and sets spec.configuration name +
# source (getMachineConfigRefs, after MergeMachineConfigs reordered the slice: worker first).
def test_sync_snapshot():
    infra = pool("infra", roles=["worker", "infra"])
    items = [pool("worker"), infra, mc("00-worker"), mc("10-infra", role="infra"),
             osimageurl_mc("worker", CUSTOM),
             {"kind": "ControllerConfig", "metadata": {"name": "machine-config-controller"},
              "spec": {"baseOSContainerImage": BASE}}]
    before = copy.deepcopy(items)
    out = R.sync(items)
    assert items == before                                     # a new list, the input untouched
    pools = {p["metadata"]["name"]: p for p in out if p["kind"] == "MachineConfigPool"}
    rendered = {m["metadata"]["name"]: m for m in out if m["kind"] == "MachineConfig"
                and m["metadata"]["name"].startswith("rendered-")}
    assert len(rendered) == 2
    for name, p in pools.items():
        cfg = p["spec"]["configuration"]
        assert cfg["name"] in rendered and cfg["name"].startswith(f"rendered-{name}-")
        assert rendered[cfg["name"]]["spec"]["osImageURL"] == CUSTOM
        assert [c["status"] for c in p["status"]["conditions"] if c["type"] == "RenderDegraded"] == ["False"]
    assert [s["name"] for s in pools["infra"]["spec"]["configuration"]["source"]] == [
        "00-worker", "ocl-osimageurl-worker", "10-infra"]
    assert pools["worker"]["spec"]["configuration"]["source"][0] == {
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": "00-worker"}
    again = R.sync(out)
    assert again == out                                        # idempotent: same content, same name


def test_sync_records_refusal_and_keeps_configuration():
    p = pool(stream="rhel-10")
    p["spec"]["configuration"]["name"] = "rendered-worker-old"
    out = R.sync([p, mc("00-worker"), osimageurl_mc("worker", CUSTOM)], base_image=BASE)
    got = next(o for o in out if o["kind"] == "MachineConfigPool")
    assert got["spec"]["configuration"] == {"name": "rendered-worker-old"}
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "RenderDegraded")
    assert cond["status"] == "True"
    assert cond["message"].startswith("Failed to render configuration for pool worker: ")
    assert not [o for o in out if o["metadata"]["name"].startswith("rendered-")]


def test_sync_uses_the_pool_stream_base():
    stream = {"kind": "OSImageStream", "metadata": {"name": "cluster"},
              "status": {"defaultStream": "rhel-9", "availableStreams": [
                  {"name": "rhel-9", "osImage": BASE}, {"name": "rhel-10", "osImage": CUSTOM}]}}
    out = R.sync([pool(stream="rhel-10"), mc("00-worker"), stream])
    r = next(o for o in out if o["metadata"]["name"].startswith("rendered-"))
    assert r["spec"]["osImageURL"] == CUSTOM
    assert "machineconfiguration.openshift.io/os-image-url-overridden" not in r["metadata"]["annotations"]


# roll_out: node/status.go calculateStatus: counts; status.configuration = spec.configuration only
# when all machines are updated; Updated / Updating conditions.
@pytest.mark.parametrize("updated, done", [(0, False), (2, False), (3, True)])
def test_roll_out(updated, done):
    p = pool()
    p["spec"]["configuration"] = {"name": "rendered-worker-new", "source": [{"name": "00-worker"}]}
    p["status"]["configuration"] = {"name": "rendered-worker-old"}
    out = R.roll_out(p, updated)
    st = out["status"]
    assert (st["machineCount"], st["updatedMachineCount"]) == (3, updated)
    assert st["configuration"]["name"] == ("rendered-worker-new" if done else "rendered-worker-old")
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds == ({"Updated": "True", "Updating": "False"} if done
                     else {"Updated": "False", "Updating": "True"})
    assert p["status"]["configuration"] == {"name": "rendered-worker-old"}   # input untouched


def test_roll_out_rejects_impossible_counts():
    with pytest.raises(ValueError):
        R.roll_out(pool(), 4)


class FakeAPI:
    """The RealAPI methods sync_api uses, over a dict."""

    def __init__(self, objs):
        self.objs = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in objs}
        self.calls = []

    @staticmethod
    def path(kind, namespace="", name=""):
        return f"/{kind}/{name}"

    def get(self, kind, namespace, name):
        return copy.deepcopy(self.objs.get((kind, name)))

    def list(self, kind, namespace=""):
        return [copy.deepcopy(o) for (k, _), o in self.objs.items() if k == kind]

    def create(self, obj):
        self.calls.append(("POST", obj["metadata"]["name"]))
        self.objs[(obj["kind"], obj["metadata"]["name"])] = copy.deepcopy(obj)
        return obj

    def request(self, method, path, body=None):
        self.calls.append((method, path))
        _, kind, name = path.split("/")[:3]
        self.objs[(kind, name)] = copy.deepcopy(body)
        return 200, copy.deepcopy(body)


def test_sync_api():
    api = FakeAPI([pool(), mc("00-worker"), osimageurl_mc("worker", CUSTOM)])
    out = R.sync_api(api, "worker", BASE)
    assert api.calls == [("POST", out["metadata"]["name"]), ("PUT", "/MachineConfigPool/worker"),
                         ("PUT", "/MachineConfigPool/worker/status")]
    stored = api.get("MachineConfigPool", "", "worker")
    assert stored["spec"]["configuration"]["name"] == out["metadata"]["name"]
    api.calls.clear()
    assert R.sync_api(api, "worker", BASE) == out
    assert ("POST", out["metadata"]["name"]) not in api.calls        # present: not created again
