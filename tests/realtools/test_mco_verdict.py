"""The machine-config daemon's own rule for when a node reboots, through `ocl-mco-harness verdict`
(tests/tools/mco/, `make mco`): the daemon's unexported functions of pkg/daemon/update.go, compiled
into the MCO at 7ff337a4 (../shared/mco/). Issue 39 will hold a Python port to these answers; here the
CLI is held to what the MCO's source says, read there:
- `(*Daemon).calculatePostConfigChangeNodeDisruptionAction`: an osImageURL, kernel argument, FIPS,
  kernel type or extensions change reboots; no file, unit or passwd change is None;
- `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`: a file without a policy reboots; the
  built-in policies (pkg/apihelpers `defaultClusterPolicies`): /var/lib/kubelet/config.json None,
  /etc/containers/policy.json a reload of crio.service, /etc/containers/registries.conf Special;
- `calculatePostConfigChangeActionFromMCDiffs` (the rule before policies): policy.json "reload crio",
  any unit change reboots;
- `isDrainRequiredForNodeDisruptionActions`: Reboot drains, Reload does not."""

from __future__ import annotations

import json
import subprocess
from typing import Any
from urllib.parse import quote

import pytest

from tests.support import factory as F
from tests.support import mcoreal

BASE, OTHER = F.BASE, "quay.io/ocp/other@sha256:" + "d" * 64


@pytest.fixture(scope="module")
def binary():
    return mcoreal.harness()


def mc(name: str, files: dict[str, str] | None = None, image: str = BASE, units: dict[str, str] | None = None,
       **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{F.MCO}/v1", "kind": "MachineConfig", "metadata": {"name": name},
            "spec": {"osImageURL": image, "config": {"ignition": {"version": "3.5.0"},
                     "storage": {"files": [{"path": p, "mode": 420, "contents": {"source": "data:," + quote(c)}}
                                           for p, c in (files or {}).items()]},
                     "systemd": {"units": [{"name": n, "enabled": True, "contents": c}
                                           for n, c in (units or {}).items()]}}, **spec}}


def verdict(binary, tmp_path, old, new, *flags: str) -> dict[str, Any]:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = subprocess.run([str(binary), "verdict", "--old", str(tmp_path / "old.json"),
                          "--new", str(tmp_path / "new.json"), *(flags or ("--default-policies",))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


A = mc("rendered-a", {"/etc/base": "1"})


@pytest.mark.parametrize(("new", "actions", "drain"), [
    (mc("b", {"/etc/base": "1"}, image=OTHER), [{"type": "Reboot"}], True),
    (mc("b", {"/etc/base": "1"}, kernelArguments=["nosmt"]), [{"type": "Reboot"}], True),
    (mc("b", {"/etc/base": "1"}, kernelType="realtime"), [{"type": "Reboot"}], True),
    (mc("b", {"/etc/base": "2"}), [{"type": "Reboot"}], True),
    (mc("b", {"/etc/base": "1", "/etc/motd": "hi"}), [{"type": "Reboot"}], True),
    (mc("b", {"/etc/base": "1", "/var/lib/kubelet/config.json": "{}"}), [{"type": "None"}], False),
    (mc("b", {"/etc/base": "1", "/etc/containers/policy.json": "{}"}),
     [{"type": "Reload", "reload": {"serviceName": "crio.service"}}], False),
    (mc("b", {"/etc/base": "1"}), [{"type": "None"}], False),
], ids=["osImageURL", "kargs", "kernelType", "file-changed", "file-added", "kubelet-auth", "policy-json", "same"])
def test_the_daemons_node_disruption_rule(binary, tmp_path, new, actions, drain):
    got = verdict(binary, tmp_path, A, new)
    assert (got["rule"], got["actions"], got["reboot"], got["drain"]) == (
        "nodeDisruptionPolicy", actions, actions == [{"type": "Reboot"}], drain)


def test_the_rule_before_policies_and_the_diff_it_reports(binary, tmp_path):
    new = mc("b", {"/etc/base": "1", "/etc/containers/policy.json": "{}"})
    got = verdict(binary, tmp_path, A, new, "--rule", "legacy")
    assert (got["rule"], got["legacyActions"], got["reboot"], got["files"]) == (
        "legacy", ["reload crio"], False, ["/etc/containers/policy.json"])
    unit = mc("b", {"/etc/base": "1"}, units={"x.service": "[Unit]\n"})
    got = verdict(binary, tmp_path, A, unit, "--rule", "legacy")
    assert (got["legacyActions"], got["units"], got["diff"]["units"]) == (["reboot"], ["x.service"], True)
    # with policies, a unit without one reboots too (only units the policies name are spared)
    got = verdict(binary, tmp_path, A, unit)
    assert got["actions"] == [{"type": "Reboot"}] and got["units"] == ["x.service"]


def test_a_policy_file_pairs_and_clear_errors(binary, tmp_path):
    mcop = {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster", "generation": 2},
            "status": {"observedGeneration": 2, "nodeDisruptionPolicyStatus": {"clusterPolicies": {
                "files": [{"path": "/etc/motd", "actions": [{"type": "Restart", "restart": {"serviceName": "motd.service"}}]}],
                "sshkey": {"actions": [{"type": "None"}]}}}}}
    (tmp_path / "mcop.json").write_text(json.dumps(mcop))
    (tmp_path / "pairs.json").write_text(json.dumps([
        {"old": A, "new": mc("b", {"/etc/base": "1", "/etc/motd": "hi"})},
        {"old": A, "new": mc("c", {"/etc/base": "1"}, image=OTHER)}]))
    out = subprocess.run([str(binary), "verdict", "--pairs", str(tmp_path / "pairs.json"),
                          "--policies", str(tmp_path / "mcop.json")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, second = json.loads(out.stdout)
    assert first["actions"] == [{"type": "Restart", "restart": {"serviceName": "motd.service"}}] and not first["reboot"]
    assert second["reboot"] and second["diff"]["osUpdate"]
    # a status not yet observed is refused, as the daemon waits for it
    mcop["status"]["observedGeneration"] = 1
    (tmp_path / "mcop.json").write_text(json.dumps(mcop))
    out = subprocess.run([str(binary), "verdict", "--pairs", str(tmp_path / "pairs.json"),
                          "--policies", str(tmp_path / "mcop.json")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "not up to date" in out.stderr
    out = subprocess.run([str(binary), "verdict", "--old", "x"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "verdict needs --old and --new, or --pairs" in out.stderr
    out = subprocess.run([str(binary), "help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "calculatePostConfigChangeNodeDisruptionActionFromMCDiffs" in out.stdout
