"""The cluster's registries.conf and policy.json, read from the rendered MachineConfig's Ignition
files (RFC 2397 data: URLs, optionally gzip as Ignition 3 allows), reach the build Pod as a
ConfigMap of ours; what cannot be read blocks the pool naming the file."""

from __future__ import annotations

import base64
import gzip
import urllib.parse

import pytest

from reconcile.contract import annotations as A
from reconcile.imagebuild import containersconf
from tests.support import factory as F

REGISTRIES = '[[registry]]\nlocation = "quay.io/openshift-release-dev"\n[[registry.mirror]]\nlocation = "mirror.example.com:5000/ocp"\n'


def mc_with(source, compression=None, path="/etc/containers/registries.conf"):
    mc = F.machineconfig("rendered-worker-1")
    contents = {"source": source, **({"compression": compression} if compression else {})}
    mc["spec"]["config"]["storage"]["files"].append({"path": path, "mode": 420, "contents": contents})
    return mc


@pytest.mark.parametrize("source, compression", [
    ("data:," + urllib.parse.quote(REGISTRIES), None),
    ("data:text/plain;charset=utf-8;base64," + base64.b64encode(REGISTRIES.encode()).decode(), None),
    ("data:;base64," + base64.b64encode(gzip.compress(REGISTRIES.encode())).decode(), "gzip"),
])
def test_every_encoding_ignition_allows_is_read(source, compression):
    assert containersconf.from_machineconfig(mc_with(source, compression)) == {"registries.conf": REGISTRIES}


def test_a_machineconfig_without_them_gives_nothing():
    assert containersconf.from_machineconfig(F.machineconfig("rendered-worker-1")) == {}


def test_the_pod_gets_them_as_a_configmap_and_env(run_cli):
    policy = '{"default": [{"type": "insecureAcceptAnything"}]}'
    mc = mc_with("data:," + urllib.parse.quote(REGISTRIES))
    mc["spec"]["config"]["storage"]["files"].append(
        {"path": "/etc/containers/policy.json", "contents": {"source": "data:," + urllib.parse.quote(policy)}})
    items = [o for o in F.cluster() if o["kind"] != "MachineConfig"] + [mc]
    code, after, err = run_cli.run(items)
    assert code == 0, err
    (cm,) = [o for o in F.owned(after) if o["metadata"]["name"].startswith("ocl-containers-worker-")]
    assert cm["data"] == {"registries.conf": REGISTRIES, "policy.json": policy} and cm["immutable"] is True
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["CONTAINERS_REGISTRIES_CONF"] == "/etc/ocl/containers/registries.conf"
    assert env["SIGNATURE_POLICY"] == "/etc/ocl/containers/policy.json"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["containers"]["configMap"]["name"] == cm["metadata"]["name"]
    # the service CA every OpenShift namespace has, optional (plain Kubernetes has none)
    assert volumes["service-ca"]["configMap"] == {"name": "openshift-service-ca.crt", "optional": True,
                                                  "items": [{"key": "service-ca.crt", "path": "service-ca.crt"}]}


def test_without_them_the_pod_has_no_such_env(run_cli):
    code, after, _ = run_cli.run(F.cluster())
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    names = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "CONTAINERS_REGISTRIES_CONF" not in names and "SIGNATURE_POLICY" not in names
    assert not [o for o in F.owned(after) if o["metadata"]["name"].startswith("ocl-containers-")]


@pytest.mark.parametrize("source, compression, says", [
    ("https://example.com/registries.conf", None, "is not a data: URL"),
    ("data:;base64," + base64.b64encode(b"not gzip").decode(), "gzip", "cannot decode"),
    ("data:,x", "xz", "compression 'xz' is not supported"),
])
def test_what_cannot_be_read_blocks_the_pool_naming_the_file(run_cli, source, compression, says):
    items = [o for o in F.cluster() if o["kind"] != "MachineConfig"] + [mc_with(source, compression)]
    code, after, _ = run_cli.run(items)
    a = F.the_pool(after)["metadata"]["annotations"]
    assert code == 2 and a[A.STATE] == A.BLOCKED
    assert a[A.MESSAGE].startswith("MachineConfig rendered-worker-1: /etc/containers/registries.conf: ")
    assert says in a[A.MESSAGE]


def test_an_openshift_build_gets_them_from_its_build_controller_not_from_us(run_cli, monkeypatch):
    """openshift/openshift-controller-manager pkg/build/controller/strategy/util.go
    (setupContainersConfigs) mounts the cluster's registries.conf and policy.json into build pods."""
    monkeypatch.setattr(F, "BUILDER", "openshift-image-builder")
    items = [o for o in F.cluster() if o["kind"] != "MachineConfig"] + [
        mc_with("data:," + urllib.parse.quote(REGISTRIES))]
    code, after, err = run_cli.run(items)
    assert code == 0, err
    assert [o["kind"] for o in F.owned(after)].count("Build") == 1
    assert not [o for o in F.owned(after) if o["metadata"]["name"].startswith("ocl-containers-")]


def test_a_registry_ca_that_does_not_exist_is_a_one_line_fatal_error(run_cli, tmp_path):
    code, out, err = run_cli("diff", "--snapshot", str(run_cli.write(F.cluster())),
                             "--registry-ca", str(tmp_path / "missing.crt"))
    assert (code, out) == (3, "") and err.strip().endswith(f"--registry-ca {tmp_path / 'missing.crt'}: no such file")
    assert len(err.strip().splitlines()) == 1
