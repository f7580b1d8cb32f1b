"""The build Pod the reconciler renders with `buildStorage: persistent`, run as it is (no harness
change to its env or volumes): its PersistentVolumeClaim is a host directory mounted where the Pod
mounts it, and the second build of the pool, after a one-file change, pulls no layer of the base
from the real registry (its access log). The first build's Pod and the second's are made by two
runs of the reconciler, as on a cluster; the volume is the one the first run created."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest

from reconcile.contract import annotations as A
from tests.realbuild.test_buildstorage import _images, _layer_gets, env  # noqa: F401  (fixture)
from tests.support import factory as F
from tests.support import osimage
from tests.support import realbuild as R
from tests.unit.test_storage import GP3

pytestmark = pytest.mark.realbuild


def persistent(items: list[dict]) -> list[dict]:
    items = copy.deepcopy(items)
    next(o for o in items if o["metadata"]["name"] == "on-cluster-build-config")["data"]["buildStorage"] = "persistent"
    return items + [copy.deepcopy(GP3)]


def test_the_rendered_pod_keeps_the_base_on_its_volume_between_builds(env, run_cli):  # noqa: F811
    registry, host, image, root = env
    volume = Path(tempfile.mkdtemp(prefix="pvc-", dir=root))
    volume.chmod(0o777)                     # what fsGroup does for uid 1000 on a real volume's root
    mc = F.machineconfig("rendered-pvc-1")
    items = persistent(osimage.one_pool(registry, image.ref, mc))
    runs = []
    for n, config in enumerate((mc, _one_file_changed(mc)), start=1):
        if n > 1:
            F.the_pool(items)["spec"]["configuration"]["name"] = config["metadata"]["name"]
            items.append(config)
        code, items, err = run_cli.run(items)
        assert code == 0, err
        (pod,) = [o for o in F.owned(items) if o["kind"] == "Pod"]
        (claim,) = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                    if "persistentVolumeClaim" in v]
        assert F.the_pool(items)["metadata"]["annotations"][A.BUILD_STORAGE] == f"PersistentVolumeClaim/{claim}"
        (mount,) = [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "storage"]
        mark = len(registry.requests())
        code, message, logs = R.run_build_pod_unprivileged(pod, items, host, root / f"pvc-{n}",
                                                           volumes={mount: volume}, pod_devices=True)
        assert code == 0, logs
        runs.append((claim, _layer_gets(registry.requests()[mark:], image)))
        items = [o for o in items if o["kind"] != "Pod"]          # the kubelet ran it; a run deletes it
    (first_claim, first_gets), (second_claim, second_gets) = runs
    assert first_claim == second_claim
    assert len(first_gets) == len(image.layer_digests) and second_gets == []
    assert [image.ref] in _images(volume)


def _one_file_changed(mc: dict) -> dict:
    changed = copy.deepcopy(mc)
    changed["metadata"]["name"] = "rendered-pvc-2"
    changed["spec"]["config"]["storage"]["files"][0]["contents"]["source"] = "data:,one%20file%20changed"
    return changed
