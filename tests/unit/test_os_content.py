"""Image content from the MachineConfig: extensions and kernel type (golden Dockerfiles for each
combination), what blocks, and that kernel arguments stay out of the image."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconcile.contract import annotations as A
from reconcile.core import desired
from reconcile.imagebuild import settings
from tests.support import factory as F

GOLDEN = Path(__file__).parent.parent / "golden"
EXT = "quay.io/ocp/extensions@sha256:" + "e" * 64


def _inputs(ext_image=EXT):
    s = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                             "machine-config-osimageurl": F.osimageurl(baseOSExtensionsContainerImage=ext_image)})
    pool = F.pool("worker", rendered="rendered-worker-0123456789abcdef")
    return desired.inputs(s, pool, F.content(pool))


def _mc(extensions=(), kernel_type="default", kargs=()):
    mc = F.machineconfig("rendered-worker-0123456789abcdef")
    mc["spec"].update(extensions=list(extensions), kernelType=kernel_type, kernelArguments=list(kargs))
    return mc


@pytest.mark.parametrize("case, extensions, kernel_type", [
    ("default", [], "default"),
    ("extensions", ["usbguard", "kernel-devel"], "default"),
    ("realtime", [], "realtime"),
    ("extensions-64k", ["wasm"], "64k-pages"),
])
def test_dockerfile_golden_per_combination(case, extensions, kernel_type):
    text = desired.dockerfile(_inputs(), machineconfig=_mc(extensions, kernel_type, ["nosmt"]))
    golden = GOLDEN / f"Dockerfile.os-{case}"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    assert "nosmt" not in text                                   # kernel arguments are the node's
    assert ("--mount=type=bind,from=" + EXT in text) == bool(extensions or kernel_type != "default")


def test_unknown_extension_or_kernel_type_blocks():
    with pytest.raises(desired.Blocked, match="unknown extension\\(s\\) frobnicate"):
        desired.dockerfile(_inputs(), machineconfig=_mc(["frobnicate"]))
    with pytest.raises(desired.Blocked, match="unknown kernelType 'turbo'"):
        desired.dockerfile(_inputs(), machineconfig=_mc(kernel_type="turbo"))


def test_extensions_need_the_extensions_image(any_cli):
    items = F.cluster(settings=[F.build_config(), F.osimageurl(baseOSExtensionsContainerImage=""),
                                F.secret("pull-secret"), F.secret("push-secret")])
    F.find(items, "MachineConfig")[0]["spec"]["extensions"] = ["usbguard"]
    code, after, _ = any_cli.run(items)
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == (
        "MachineConfig rendered-worker-1 needs extensions usbguard, but ConfigMap "
        "machine-config-osimageurl has no 'baseOSExtensionsContainerImage'")


def test_a_kernel_type_alone_names_itself_as_what_needs_the_extensions_image():
    from reconcile.core import desired
    from tests.unit.test_lifecycle_unit import good_settings
    inp = desired.inputs(good_settings(), F.pool(), F.content(F.pool()))
    mc = F.machineconfig("rendered-worker-1")
    mc["spec"].update(kernelType="realtime", extensions=[])
    with pytest.raises(desired.Blocked) as err:
        desired.os_content(inp, mc)
    assert str(err.value).startswith("MachineConfig rendered-worker-1 needs kernelType realtime, but ")
    mc["spec"].update(extensions=["usbguard"])
    with pytest.raises(desired.Blocked) as err:
        desired.os_content(inp, mc)
    assert "needs extensions usbguard and kernelType realtime, but " in str(err.value)


@pytest.mark.parametrize("extensions, kernel_type", [(["usbguard"], "realtime")])
def test_extension_dockerfile_passes_hadolint(tmp_path, extensions, kernel_type):
    import subprocess

    from tests.unit.test_manifests import HADOLINT_IGNORED, _hadolint
    path = tmp_path / "Dockerfile"
    path.write_text(desired.dockerfile(_inputs(), machineconfig=_mc(extensions, kernel_type)))
    ignores = [arg for rule in HADOLINT_IGNORED for arg in ("--ignore", rule)]
    result = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "warning", *ignores, str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_both_builders_get_the_extension_step(any_cli, monkeypatch, builder):
    monkeypatch.setattr(F, "BUILDER", builder)
    items = F.cluster(settings=[F.build_config(), F.osimageurl(baseOSExtensionsContainerImage=EXT),
                                F.secret("pull-secret"), F.secret("push-secret")])
    mc = F.find(items, "MachineConfig")[0]
    mc["spec"].update(extensions=["ipsec"], kernelType="realtime")
    code, after, _ = any_cli.run(items)
    assert code == 0
    dockerfile = next(o for o in F.owned(after) if "Dockerfile" in o.get("data", {}))["data"]["Dockerfile"]
    assert "rpm-ostree install NetworkManager-libreswan libreswan" in dockerfile
    assert "--install kernel-rt-core" in dockerfile and f"from={EXT}" in dockerfile


# --- a content change the MCO makes by extensions or fips alone: a new build carrying it --------

def _succeeded(any_cli):
    """worker built and recorded Succeeded on rendered-worker-1 (no extensions, fips off)."""
    import kubelet
    items = F.cluster(settings=[F.build_config(), F.osimageurl(baseOSExtensionsContainerImage=EXT),
                                F.secret("pull-secret"), F.secret("push-secret")])
    code, items, err = any_cli.run(items)
    assert code == 0, err
    for obj in F.owned(items):
        if obj["kind"] in ("Pod", "Build"):
            kubelet.set_phase(obj, "Succeeded", digest="sha256:" + "1" * 64)
    code, items, err = any_cli.run(items)
    assert code == 0 and F.the_pool(items)["metadata"]["annotations"][A.STATE] == A.SUCCEEDED, err
    return items


def _rerendered(items, **spec):
    """The MCO renders rendered-worker-2: rendered-worker-1's Ignition, with only `spec` changed."""
    import copy
    items = copy.deepcopy(items)
    F.the_pool(items)["spec"]["configuration"]["name"] = "rendered-worker-2"
    mc = F.machineconfig("rendered-worker-2", content="rendered-worker-1")
    mc["spec"].update(spec)
    return items + [mc]


def _new_build(after):
    """The build objects of the run after the change: Dockerfile text and decoded MachineConfig."""
    from reconcile.imagebuild import encoding
    a = F.the_pool(after)["metadata"]["annotations"]
    assert a[A.STATE] == A.PENDING and a[A.RENDERED] == "rendered-worker-2", a.get(A.MESSAGE)
    (build,) = [o for o in F.owned(after) if o["kind"] in ("Pod", "Build")]
    assert a[A.BUILD].split("/")[-1] == build["metadata"]["name"]
    cms = [o for o in F.owned(after) if o["kind"] == "ConfigMap"]
    dockerfile = next(o for o in cms if "Dockerfile" in o.get("data", {}))["data"]["Dockerfile"]
    payload = next(o for o in cms if encoding.KEY in o.get("data", {}))["data"][encoding.KEY]
    return dockerfile, encoding.decode(payload)


def test_an_extension_alone_starts_a_build_that_installs_it(any_cli, builder):
    """spec.extensions is image content (imagecontent.py; docs/contract.md, "What of the
    MachineConfig makes the image"): a rendered config that only adds one is not EQUIVALENT."""
    items = _succeeded(any_cli)
    old_build = F.the_pool(items)["metadata"]["annotations"][A.BUILD]
    code, after, err = any_cli.run(_rerendered(items, extensions=["usbguard"]))
    assert code == 0, err
    assert F.the_pool(after)["metadata"]["annotations"][A.BUILD] != old_build
    dockerfile, mc = _new_build(after)
    # manifests/extensions.yaml: usbguard -> [usbguard], installed from the extensions image
    assert "rpm-ostree install usbguard" in dockerfile and f"from={EXT}," in dockerfile
    assert 'LABEL "machineconfig"="rendered-worker-2"' in dockerfile
    assert mc["spec"]["extensions"] == ["usbguard"]


def test_fips_alone_starts_a_build_of_the_config_that_turns_it_on(any_cli, builder):
    """spec.fips is image content too (docs/contract.md: "part of the content digest"): the new
    build's Dockerfile is of the new rendered config, whose spec.fips it copies into the image
    (/etc/machine-config-daemon/currentconfig)."""
    items = _succeeded(any_cli)
    old_build = F.the_pool(items)["metadata"]["annotations"][A.BUILD]
    code, after, err = any_cli.run(_rerendered(items, fips=True))
    assert code == 0, err
    assert F.the_pool(after)["metadata"]["annotations"][A.BUILD] != old_build
    dockerfile, mc = _new_build(after)
    assert 'LABEL "machineconfig"="rendered-worker-2"' in dockerfile
    assert "/etc/machine-config-daemon/currentconfig" in dockerfile
    assert mc["metadata"]["name"] == "rendered-worker-2" and mc["spec"]["fips"] is True
