"""kustomize/components/image-policy against the real kube-apiserver serving openshift/api's own
ClusterImagePolicy CRD (config.openshift.io/v1, vendored in ../shared/mco/mco-src.tar.gz): the
Component as shipped is refused until the administrator replaces both placeholders (so a forgotten
patch fails at `oc apply`, not on the nodes), and, patched as docs/signing.md patches it, it is
accepted with the identity rule we chose. Requests are dry runs: nothing is stored."""

from __future__ import annotations

import base64
import copy
import subprocess

import pytest
import yaml

from tests.support import factory as F
from tests.support import realserver

pytestmark = pytest.mark.realapi
CIP = F.ROOT / "kustomize/components/image-policy/clusterimagepolicy.yaml"
PATH = "/apis/config.openshift.io/v1/clusterimagepolicies?dryRun=All"


@pytest.fixture(scope="module")
def api(server):
    """The server (which needs ../shared/mco/mco-src.tar.gz already) serving openshift/api's CRD."""
    with server.serving(realserver.mco_src_crds((realserver.IMAGE_POLICY_CRD,))):
        yield server


@pytest.fixture(scope="module")
def public_key(tmp_path_factory) -> bytes:
    """A PEM public key of the kind `cosign generate-key-pair` writes (ECDSA P-256)."""
    root = tmp_path_factory.mktemp("key")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "k.pem"],
                   cwd=root, check=True, capture_output=True)
    return subprocess.run(["openssl", "ec", "-in", "k.pem", "-pubout"], cwd=root, check=True,
                          capture_output=True).stdout


def patched(scope: str, key: bytes) -> dict:
    obj = copy.deepcopy(yaml.safe_load(CIP.read_text()))
    obj["spec"]["scopes"][0] = scope
    obj["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"] = base64.b64encode(key).decode()
    return obj


def test_the_component_as_shipped_is_refused(api):
    status, body = api.request("POST", PATH, yaml.safe_load(CIP.read_text()), ok=(422,))
    assert status == 422
    assert {c["field"] for c in body["details"]["causes"]} >= {"spec.policy.rootOfTrust.publicKey.keyData"}, body


@pytest.mark.parametrize("replaced, still_placeholder", [
    ("keyData", "spec.scopes[0]"), ("scope", "spec.policy.rootOfTrust.publicKey.keyData")])
def test_each_placeholder_alone_is_refused(api, public_key, replaced, still_placeholder):
    """The server checks the CRD's CEL rules (the scope's) only once the schema holds, so each
    placeholder is tried with the other one replaced: either forgotten, the object is refused."""
    shipped = yaml.safe_load(CIP.read_text())
    obj = patched("registry.example.com/ocl/os-image", public_key)
    if replaced == "keyData":
        obj["spec"]["scopes"] = shipped["spec"]["scopes"]
    else:
        obj["spec"]["policy"] = shipped["spec"]["policy"]
    status, body = api.request("POST", PATH, obj, ok=(422,))
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]][:1] == [still_placeholder], body


def test_the_component_patched_with_a_repository_and_a_key_is_accepted(api, public_key):
    status, body = api.request("POST", PATH, patched("registry.example.com/ocl/os-image", public_key))
    assert status == 201, body
    assert body["spec"]["policy"]["signedIdentity"] == {"matchPolicy": "MatchRepository"}
    assert body["spec"]["scopes"] == ["registry.example.com/ocl/os-image"]


@pytest.mark.parametrize("scope", ["image-registry.openshift-image-registry.svc:5000/ocl-reconciler/os-image",
                                   "127.0.0.1:5000/ocl/os-image"])
def test_the_repositories_the_docs_and_tests_use_are_valid_scopes(api, public_key, scope):
    status, body = api.request("POST", PATH, patched(scope, public_key))
    assert status == 201, body


def test_a_key_that_is_not_a_pem_public_key_is_refused(api, public_key):
    """keyData must be base64 of a PEM public key (the CRD's rules): a private key is refused."""
    obj = patched("registry.example.com/ocl/os-image", public_key)
    obj["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"] = base64.b64encode(
        b"-----BEGIN EC PRIVATE KEY-----\n" + b"A" * 64 + b"\n-----END EC PRIVATE KEY-----\n").decode()
    status, body = api.request("POST", PATH, obj, ok=(422,))
    assert status == 422
    assert "the keyData must start with base64 encoding of '-----BEGIN PUBLIC KEY-----'." in body["message"], body
