"""Issue 50, behaviour 3: preflight's `rendered-policy` fails when the pool's rendered
/etc/containers/policy.json requires, for our repository, another key than the ones the builds sign
with, or an identity rule that refuses their signatures; it is ok only where the nodes accept what
the reconciler signs.

The policy.json is what the MCO's own container-runtime-config code renders from the
ClusterImagePolicies (`ocl-crc-render`, `make crcrender`: `getValidScopePolicies`,
`registriesConfigIgnition`, `updatePolicyJSON`, `policyItemFromSpec` at 7ff337a4), as
tests/realtools/test_signing.py has it render the Component. Expected verdicts are containers/image's
rules (containers-policy.json(5); image/signature/policy_reference_match.go): every requirement of the
most specific scope applies; cosign signs with the repository alone as its identity
(sigstore/sigstore `payload.go`), which `matchRepository` and `exactRepository` of our repository
accept, and `matchRepoDigestOrExact` (the API's default, `signedIdentity` omitted) and
`remapIdentity` refuse for an image named by digest (test_signing.py shows the refusal with cosign)."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from typing import Any

import pytest
import yaml

from reconcile import preflight as P
from tests.support import factory as F
from tests.support import signing as S
from tests.unit.test_preflight import lines
from tests.unit.test_preflight_signing import signed_facts
from tests.unit.test_signing_plan import PUB_NEW, PUB_OLD

RELEASE = "quay.io/openshift-release-dev/ocp-release@sha256:" + "f" * 64
#: the ClusterImagePolicy of kustomize/components/image-policy, patched as docs/signing.md says, for
#: the key the builds sign with (Secret cosign-old): what signed_facts() lists
OURS = signed_facts().image_policies[0]


def cip(name: str = "ocl-reconciler-images", pub: bytes = PUB_OLD, identity: dict[str, Any] | None = None,
        scope: str = F.REPO, drop_identity: bool = False) -> dict[str, Any]:
    out = copy.deepcopy(OURS)
    out["metadata"]["name"] = name
    out["spec"]["scopes"] = [scope]
    out["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"] = base64.b64encode(pub).decode()
    if identity is not None:
        out["spec"]["policy"]["signedIdentity"] = identity
    if drop_identity:
        del out["spec"]["policy"]["signedIdentity"]
    return out


@pytest.fixture(scope="module")
def crc():
    return S.tool("crcrender")


@pytest.fixture
def render(crc, tmp_path):
    """The pool's rendered policy.json for these ClusterImagePolicies, by the MCO's own code."""
    def run(*policies: dict[str, Any]) -> str:
        folder = tmp_path / f"render-{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "policies.yaml").write_text(yaml.safe_dump_all(list(policies)))
        files = S.mco_render(crc, folder / "policies.yaml", RELEASE, folder / "node")
        return files.policy.read_text()
    return run


def rendered_policy(policy_json: str, *policies: dict[str, Any], keys: str = "cosign-old") -> list[P.Result]:
    """preflight's `rendered-policy` lines on a cluster with these ClusterImagePolicies whose pool
    rendered this policy.json, the builds signing with `keys`."""
    facts = dataclasses.replace(signed_facts(keys=keys), image_policies=list(policies),
                                rendered_policies={"worker": policy_json})
    return lines(facts, "rendered-policy")


def requirements(policy_json: str) -> list[dict[str, Any]]:
    return json.loads(policy_json)["transports"]["docker"][F.REPO]


# --- ok: what the nodes accept ---------------------------------------------------------------------

@pytest.mark.parametrize("identity", [{"matchPolicy": "MatchRepository"},
                                      {"matchPolicy": "ExactRepository", "exactRepository": {"repository": F.REPO}}],
                         ids=["MatchRepository", "ExactRepository-ours"])
def test_our_key_under_an_identity_rule_that_accepts_cosigns_signature_is_ok(render, identity):
    policy = cip(identity=identity)
    out = render(policy)
    (req,) = requirements(out)
    assert base64.b64decode(req["keyData"]) == PUB_OLD
    (line,) = rendered_policy(out, policy)
    assert line.result == P.OK, line


def test_while_rotating_two_policies_of_our_two_keys_are_ok(render):
    """Two policies on our scope: the MCO appends both requirements, the nodes require both
    signatures, and the builds sign with both keys."""
    policies = (cip(), cip("ocl-reconciler-images-next", PUB_NEW))
    out = render(*policies)
    assert len(requirements(out)) == 2
    (line,) = rendered_policy(out, *policies, keys="cosign-old,cosign-new")
    assert line.result == P.OK, line


# --- fail: another key ---------------------------------------------------------------------------

def test_another_key_for_our_repository_fails(render):
    policy = cip(pub=PUB_NEW)
    out = render(policy)
    (req,) = requirements(out)
    assert base64.b64decode(req["keyData"]) == PUB_NEW and req["signedIdentity"] == {"type": "matchRepository"}
    (line,) = rendered_policy(out, policy)
    assert line.result == P.FAIL and "worker" in line.message and "key" in line.message, line


def test_our_key_and_another_on_our_scope_fail(render):
    """containers/image requires every requirement of the scope (test_signing.py: one key's signature
    is refused under two policies), so our key beside another is not enough."""
    policies = (cip(), cip("someone-elses", PUB_NEW))
    out = render(*policies)
    assert len(requirements(out)) == 2
    (line,) = rendered_policy(out, *policies)
    assert line.result == P.FAIL and "key" in line.message, line


# --- fail: another identity rule -------------------------------------------------------------------

@pytest.mark.parametrize("kind, patch", [
    ("matchRepoDigestOrExact", {"identity": {"matchPolicy": "MatchRepoDigestOrExact"}}),
    ("matchRepoDigestOrExact", {"drop_identity": True}),         # the API's default (policyItemFromSpec)
    ("remapIdentity", {"identity": {"matchPolicy": "RemapIdentity", "remapIdentity": {
        "prefix": F.REPO.rsplit("/", 1)[0], "signedPrefix": "mirror.example.com/ocl"}}}),
    ("exactRepository", {"identity": {"matchPolicy": "ExactRepository",
                                      "exactRepository": {"repository": "registry.example.com:5000/ocl/other"}}}),
], ids=["MatchRepoDigestOrExact", "signedIdentity-omitted", "RemapIdentity", "ExactRepository-another"])
def test_our_key_under_an_identity_rule_that_refuses_cosigns_signature_fails(render, kind, patch):
    policy = cip(**patch)
    out = render(policy)
    (req,) = requirements(out)
    assert base64.b64decode(req["keyData"]) == PUB_OLD and req["signedIdentity"]["type"] == kind, req
    (line,) = rendered_policy(out, policy)
    assert line.result == P.FAIL and kind in line.message and "worker" in line.message, line


# --- the scope containers/image applies ------------------------------------------------------------

def test_only_the_most_specific_scope_counts(render):
    """A broader scope's requirement does not apply to our repository where our own scope has one
    (containers-policy.json(5): the most specific scope wins); and the other way round, a narrower
    scope with another key overrides ours on a broader one."""
    host = F.REPO.split("/", 1)[0]
    policies = (cip(), cip("the-registry", PUB_NEW, scope=host))
    (line,) = rendered_policy(render(*policies), *policies)
    assert line.result == P.OK, line
    policies = (cip(scope=F.REPO.rsplit("/", 1)[0]), cip("narrower", PUB_NEW))
    (line,) = rendered_policy(render(*policies), *policies)
    assert line.result == P.FAIL, line


def test_no_requirement_rendered_yet_still_warns(render):
    """Rendered before our policy was applied (only another repository's policy in it): the pool
    has not rendered it yet, a warning as before."""
    out = render(cip("another-team", PUB_NEW, scope="registry.example.com:5000/other/images"))
    assert F.REPO not in json.loads(out)["transports"]["docker"]
    (line,) = rendered_policy(out, cip())
    assert line.result == P.WARN and "yet" in line.message, line


def test_the_cases_render_as_the_mco_writes_them(render):
    """The MCO's rendering of our Component itself (the fixtures above are its shapes)."""
    out = render(cip())
    (req,) = requirements(out)
    assert req == {"type": "sigstoreSigned", "keyData": base64.b64encode(PUB_OLD).decode(),
                   "signedIdentity": {"type": "matchRepository"}}
