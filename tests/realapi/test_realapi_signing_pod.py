"""The signing Pod (manifests/pod-sign.yaml.j2) as a real kube-apiserver stores it: the check that
tells our Pod from another of its name (imagebuild/signer.py `made_as`) must hold for what the
server gives back (its defaults: modes, termination message paths, ...), else a run would delete
its own signing Pod as an impostor. A dry run: nothing is stored."""

from __future__ import annotations

import pytest

from reconcile.imagebuild import signing
from reconcile.imagebuild.signing import signer
from tests.support import factory as F

pytestmark = pytest.mark.realapi


@pytest.mark.parametrize("keys", [("cosign-old",), ("cosign-old", "cosign-new")])
def test_the_server_stored_signing_pod_is_recognised_as_ours(server, keys):
    server.reset()
    pod = signer.render(name="ocl-sign-worker-x", namespace=F.NS, labels={"app": "ocl"}, annotations={},
                        owner={"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                               "name": "worker", "uid": "4f0c8a4e-0000-4000-8000-000000000001"},
                        image=f"{F.REPO}@sha256:" + "c" * 64, keys=keys,
                        signer_image=signing.DEFAULT_SIGNER_IMAGE, push_secret="push-secret")
    status, stored = server.request("POST", f"/api/v1/namespaces/{F.NS}/pods?dryRun=All", pod, ok=(201,))
    assert status == 201
    assert stored["spec"]["volumes"][0]["secret"].get("defaultMode") == 420        # the server's default
    assert signer.made_as(stored, pod)
    stored["spec"]["containers"][0]["args"] = ["version"]
    assert not signer.made_as(stored, pod)
