"""The port of the machine-config daemon's reboot rule (reconcile/imagebuild/disruption.py, issue 39)
held to the daemon's own answers: `ocl-mco-harness verdict` (tests/tools/mco/, `make mco`) runs
`newMachineConfigDiff`, the prelude of `calculatePostConfigChangeNodeDisruptionAction`,
`calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` and, for the rule before policies,
`calculatePostConfigChangeActionFromMCDiffs`, compiled from the MCO at 7ff337a4 (../shared/mco/).
Every case of tests/unit/test_disruption.py, and an administrator's entries, under the MCO's own
built-in policies (`MergeClusterPolicies`, printed by the harness); and the transcription in
tests/support/ndp.py held to those."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from reconcile.core.node import disruption
from tests.support import mcoreal, ndp
from tests.unit import test_disruption as T


@pytest.fixture(scope="module")
def binary():
    return mcoreal.harness()


@pytest.fixture(scope="module")
def defaults(binary):
    return mcoreal.default_policies(binary)


def as_dict(action: disruption.Action) -> dict[str, Any]:
    out: dict[str, Any] = {"type": action.type}
    if action.type == disruption.RELOAD:
        out["reload"] = {"serviceName": action.service}
    if action.type == disruption.RESTART:
        out["restart"] = {"serviceName": action.service}
    return out


#: `postConfigChangeAction*` (pkg/daemon/update.go) as the port names them
LEGACY = {disruption.Action("None"): "none", disruption.Action("Reboot"): "reboot",
          disruption.Action("Reload", "crio.service"): "reload crio",
          disruption.Action("Restart", "crio.service"): "restart crio"}


def real(binary, tmp_path, old, new, *flags: str) -> dict[str, Any]:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = subprocess.run([str(binary), "verdict", "--old", str(tmp_path / "old.json"),
                          "--new", str(tmp_path / "new.json"), *flags], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def key(actions):
    return sorted(json.dumps(a, sort_keys=True) for a in actions)


ADMIN = ndp.merged(files=[{"path": "/etc/myapp", "actions": [{"type": "Restart", "restart": {"serviceName": "myapp.service"}}]},
                          {"path": "/etc/containers/registries.conf", "actions": [{"type": "Reboot"}]}],
                   units=[{"name": "myapp.service", "actions": [{"type": "DaemonReload"}]}])
MORE = [("admin-file", T.mc({**T.BASE, "/etc/myapp/app.conf": "x"})),
        ("admin-sibling", T.mc({**T.BASE, "/etc/myappx": "x"})),
        ("admin-unit", T.mc(T.BASE, units={"myapp.service": "[Unit]"})),
        ("admin-registries", T.mc(T.changed("/etc/containers/registries.conf", T.REGISTRIES + "# x\n"))),
        ("kargs", T.mc(T.BASE, kernelArguments=["nosmt"])), ("extensions", T.mc(T.BASE, extensions=["usbguard"]))]


@pytest.mark.parametrize("case, new", [(c[0], c[1]) for c in T.CASES], ids=[c[0] for c in T.CASES])
def test_the_port_gives_the_daemons_actions_under_its_built_in_policies(binary, defaults, tmp_path, case, new):
    got = real(binary, tmp_path, T.mc(T.BASE), new, "--default-policies")
    ours = disruption.actions(disruption.diff(T.mc(T.BASE), new), defaults)
    assert key(got["actions"]) == key([as_dict(a) for a in ours]), (got, ours)
    assert got["reboot"] == disruption.reboots(ours)


@pytest.mark.parametrize("case, new", [(c[0], c[1]) for c in T.CASES], ids=[c[0] for c in T.CASES])
def test_the_port_gives_the_daemons_actions_before_policies(binary, tmp_path, case, new):
    got = real(binary, tmp_path, T.mc(T.BASE), new, "--rule", "legacy")
    ours = disruption.actions(disruption.diff(T.mc(T.BASE), new), None)
    assert got["legacyActions"] == [LEGACY[a] for a in ours], (got, ours)


@pytest.mark.parametrize("case, new", MORE, ids=[c[0] for c in MORE])
def test_the_port_follows_an_administrators_policy(binary, tmp_path, case, new):
    (tmp_path / "mcop.json").write_text(json.dumps(ndp.machineconfiguration(ADMIN)))
    got = real(binary, tmp_path, T.mc(T.BASE), new, "--policies", str(tmp_path / "mcop.json"))
    ours = disruption.actions(disruption.diff(T.mc(T.BASE), new), ADMIN)
    assert key(got["actions"]) == key([as_dict(a) for a in ours]), (got, ours)


def test_the_transcribed_defaults_are_the_mcos(defaults):
    """Every entry of tests/support/ndp.DEFAULTS is in the MCO's own merged defaults, with the same
    actions; the MCO's has only the IRI registry's entries more (`IRIRegistryConfigPath`,
    `IRILoadImageScriptPath` /usr/local/bin/load-registry-image.sh, `IRIRootCAPath`)."""
    real_files = {f["path"]: f["actions"] for f in defaults["files"]}
    for entry in ndp.DEFAULTS["files"]:
        assert real_files.get(entry["path"]) == entry["actions"], entry["path"]
    assert {p for p in real_files if p not in {f["path"] for f in ndp.DEFAULTS["files"]}} <= {
        p for p in real_files if "iri" in p.lower() or p == "/usr/local/bin/load-registry-image.sh"}
    assert defaults["sshkey"] == ndp.DEFAULTS["sshkey"]
