"""The daemon's rule (reconcile/imagebuild/disruption.py) and what is live for our image
(imagebuild/livechange.py), on the cases issue 39 names. Expected values: the MCO's built-in
policies (tests/support/ndp.py, from `defaultClusterPolicies`) read through
`calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`, and the pre-policy list of
`calculatePostConfigChangeActionFromMCDiffs` (openshift/machine-config-operator @ 7ff337a4,
`pkg/daemon/update.go`)."""

from __future__ import annotations

import copy
from urllib.parse import quote

import pytest

from reconcile.core.node import disruption, livechange
from reconcile.core.node.disruption import Action
from tests.support import ndp

CRIO_RELOAD = Action("Reload", "crio.service")
CA = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"


def mc(files=None, units=None, keys=("ssh-ed25519 AAAA one",), **spec):
    return {"kind": "MachineConfig", "metadata": {"name": "rendered-worker-x"},
            "spec": {"osImageURL": "registry.example.com/ocl/os@sha256:" + "1" * 64,
                     "config": {"ignition": {"version": "3.4.0"},
                                "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": list(keys)}]},
                                "storage": {"files": [{"path": p, "mode": 420, "contents": {"source": "data:," + quote(c)}}
                                                      for p, c in (files or {}).items()]},
                                "systemd": {"units": [{"name": n, "contents": c} for n, c in (units or {}).items()]}},
                     **spec}}


REGISTRIES = 'unqualified-search-registries = ["registry.access.redhat.com"]\n'
BASE = {"/etc/base": "b", "/etc/containers/registries.conf": REGISTRIES, "/etc/containers/policy.json": "p",
        "/var/lib/kubelet/config.json": "k", CA: "ca", "/etc/kubernetes/kubelet-ca.crt": "kca"}


def changed(path, value="new"):
    return {**BASE, path: value}


# (case, new config, actions under the built-in policies, actions before policies)
CASES = [
    ("ssh-key", mc(BASE, keys=("ssh-ed25519 AAAA two",)), (Action("None"),), (Action("None"),)),
    ("pull-secret", mc(changed("/var/lib/kubelet/config.json")), (Action("None"),), (Action("None"),)),
    ("registries.conf", mc(changed("/etc/containers/registries.conf", REGISTRIES.replace('"]', '", "docker.io"]'))),
     (Action("Special"),), (CRIO_RELOAD,)),
    ("policy.json", mc(changed("/etc/containers/policy.json")), (CRIO_RELOAD,), (CRIO_RELOAD,)),
    ("registries.d", mc({**BASE, "/etc/containers/registries.d/ocl.yaml": "d"}), (CRIO_RELOAD,), (CRIO_RELOAD,)),
    ("user-ca-bundle", mc(changed(CA)),
     (Action("Restart", "coreos-update-ca-trust.service"), Action("Restart", "crio.service")),
     (Action("Restart", "crio.service"),)),
    ("plain-etc-file", mc(changed("/etc/base")), disruption.REBOOTS, disruption.REBOOTS),
    ("kubelet-ca", mc(changed("/etc/kubernetes/kubelet-ca.crt")), disruption.REBOOTS, (Action("None"),)),
    ("unit", mc(BASE, units={"motd.service": "[Unit]"}), disruption.REBOOTS, disruption.REBOOTS),
    ("policy.json-and-ca", mc({**changed(CA), "/etc/containers/policy.json": "q"}),
     (Action("Restart", "coreos-update-ca-trust.service"), Action("Restart", "crio.service"), CRIO_RELOAD),
     (Action("Restart", "crio.service"),)),
    ("ssh-and-plain-file", mc(changed("/etc/base"), keys=("k2",)), disruption.REBOOTS, disruption.REBOOTS),
    ("nothing", mc(BASE), (Action("None"),), (Action("None"),)),
]


@pytest.mark.parametrize("case, new, with_policy, before_policy", CASES, ids=[c[0] for c in CASES])
def test_the_daemons_actions_for_each_change(case, new, with_policy, before_policy):
    d = disruption.diff(mc(BASE), new)
    got = disruption.actions(d, ndp.DEFAULTS)
    assert sorted(got, key=repr) == sorted(with_policy, key=repr)
    assert disruption.actions(d, None) == before_policy


@pytest.mark.parametrize("spec, field", [({"kernelArguments": ["nosmt"]}, "kargs"),
                                         ({"extensions": ["usbguard"]}, "extensions"),
                                         ({"kernelType": "realtime"}, "kernel_type"), ({"fips": True}, "fips"),
                                         ({"osImageURL": "quay.io/other@sha256:" + "2" * 64}, "os_update")])
def test_the_prelude_reboots_before_any_policy(spec, field):
    """`calculatePostConfigChangeNodeDisruptionAction`: osUpdate, kargs, fips, kernelType, extensions."""
    new = mc(BASE)
    new["spec"].update(spec)
    d = disruption.diff(mc(BASE), new)
    assert getattr(d, field) and disruption.actions(d, ndp.DEFAULTS) == disruption.REBOOTS


def test_kernel_type_default_and_empty_are_one_kernel():
    """`helpers.CanonicalizeKernelType`."""
    assert not disruption.diff(mc(BASE), mc(BASE, kernelType="default")).kernel_type


def test_an_administrators_entry_and_the_closest_path_win():
    """`FindClosestFilePolicyPathMatch`: the longest policy path equal to the file or above it; an
    administrator's entry for a path replaces the default (`MergeClusterPolicies`); units by name."""
    policies = ndp.merged(files=[{"path": "/etc/myapp", "actions": [{"type": "Restart", "restart": {"serviceName": "myapp.service"}}]},
                                 {"path": "/etc/myapp/keep.conf", "actions": [{"type": "None"}]},
                                 {"path": "/etc/containers/registries.conf", "actions": [{"type": "Reboot"}]}],
                          units=[{"name": "myapp.service", "actions": [{"type": "DaemonReload"}]}])
    act = lambda new: disruption.actions(disruption.diff(mc(BASE), new), policies)  # noqa: E731
    assert act(mc({**BASE, "/etc/myapp/app.conf": "x"})) == (Action("Restart", "myapp.service"),)
    assert act(mc({**BASE, "/etc/myapp/keep.conf": "x"})) == (Action("None"),)
    assert act(mc({**BASE, "/etc/myappx": "x"})) == disruption.REBOOTS     # a sibling, not below it
    assert act(mc(changed("/etc/containers/registries.conf", REGISTRIES + "# x\n"))) == disruption.REBOOTS
    assert act(mc(BASE, units={"myapp.service": "[Unit]"})) == (Action("DaemonReload"),)


@pytest.mark.parametrize("new, live, why", [
    (mc(BASE, keys=("k2",)), True, ""),
    (mc(changed("/etc/containers/policy.json")), True, ""),
    (mc(changed("/etc/base")), False, "reboots"),
    (mc({k: v for k, v in BASE.items() if k != "/etc/containers/policy.json"}), False, "still in the image"),
    (mc(BASE, extensions=["usbguard"]), False, "extensions"),
    (mc(BASE, keys=("k2",), kernelArguments=["nosmt"]), True, ""),     # kernel arguments: never image content
    (mc(BASE, keys=("k2",), osImageURL="quay.io/ocp/base@sha256:" + "a" * 64), True, ""),
])
def test_what_is_live_for_our_image(new, live, why):
    v = livechange.verdict(mc(BASE), new, ndp.DEFAULTS)
    assert v.live is live and why in v.why


def test_the_policy_is_trusted_only_once_observed():
    """The daemon polls until `Generation == Status.ObservedGeneration`."""
    assert livechange.policy_of(ndp.machineconfiguration()).policies == ndp.DEFAULTS
    stale = livechange.policy_of(ndp.machineconfiguration(observed=False))
    assert not stale.usable and "not observed generation 1" in stale.why
    assert not livechange.policy_of(None).usable
    assert "cannot read" in livechange.policy_of(None, "403 Forbidden").why
    odd = copy.deepcopy(ndp.machineconfiguration())
    del odd["status"]["nodeDisruptionPolicyStatus"]
    assert not livechange.policy_of(odd).usable


@pytest.mark.parametrize("release, policies", [("4.16.12", False), ("4.17.0", True), ("4.20.3", True),
                                               ("", True), ("5.0.0", True)])
def test_which_releases_read_the_policy(release, policies):
    assert livechange.has_policies(release) is policies


# --- review findings (issue 39): each failed before its fix --------------------------------------

def test_removing_links_is_not_live():
    """pkg/controller/common/reconcile.go isConfigReconcilable: links may be removed (`len(new
    links) != 0` is the only refusal) and pkg/daemon/update.go never touches links; our image was
    built by ignition-apply of the whole spec.config (manifests/Dockerfile.j2), so it keeps the link
    for every node: a removal the image holds, never live (issue 39)."""
    old = mc(BASE)
    old["spec"]["config"]["storage"]["links"] = [{"path": "/etc/localtime", "target": "/usr/share/zoneinfo/UTC"}]
    new = mc(BASE)
    v = livechange.verdict(old, new, ndp.DEFAULTS)
    assert not v.live, v


def test_removing_a_dropin_of_a_unit_is_not_live():
    """A unit kept, one of its dropins removed: the image keeps
    /etc/systemd/system/foo.service.d/10-x.conf for every node that joins later."""
    old, new = mc(BASE), mc(BASE)
    old["spec"]["config"]["systemd"]["units"] = [
        {"name": "foo.service", "contents": "[Service]\n", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nX=1\n"}]}]
    new["spec"]["config"]["systemd"]["units"] = [{"name": "foo.service", "contents": "[Service]\n"}]
    policy = ndp.merged(units=[{"name": "foo.service", "actions": [{"type": "Restart", "restart": {"serviceName": "foo.service"}}]}])
    v = livechange.verdict(old, new, policy)
    assert not v.live, v


def test_a_root_policy_path_matches_nothing_as_upstream():
    """pkg/controller/common/helpers.go IsSubdirectory: filepath.Clean("/") + "/" is "//", so a
    policy path "/" matches no file but "/" itself: FindClosestFilePolicyPathMatch finds nothing and
    the daemon reboots (calculatePostConfigChangeNodeDisruptionActionFromMCDiffs: "no policy found")."""
    policy = ndp.merged(files=[{"path": "/", "actions": [{"type": "None"}]}])
    d = disruption.diff(mc(BASE), mc({**BASE, "/etc/motd": "hi"}))
    assert disruption.actions(d, policy) == disruption.REBOOTS
