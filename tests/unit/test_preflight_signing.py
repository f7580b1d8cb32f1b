"""preflight's three signing checks (issue 41): the policy is there, its key is the builds', each
pool's rendered config carries it. The policy.json shape is what the MCO's container-runtime-config
controller writes (`updatePolicyJSON`: a `sigstoreSigned` requirement whose `keyData` is the base64
of the PEM key), as tests/realtools/test_signing.py reads it from the MCO's own code."""

from __future__ import annotations

import base64
import dataclasses
import json

from reconcile import preflight as P
from reconcile.contract import annotations as A
from reconcile.imagebuild import settings, signing
from tests.support import factory as F
from tests.unit.test_preflight import good, lines
from tests.unit.test_signing_plan import PUB_NEW, PUB_OLD, key_secret

IMAGE = f"{F.REPO}@sha256:" + "e" * 64


def signed_facts(policy_pub: bytes | None = PUB_OLD, rendered_pub: bytes | None = PUB_OLD, signed: bool = True,
                 keys: str = "cosign-old") -> P.Facts:
    found = settings.read(F.NS, {settings.BUILD_CONFIG: F.build_config(imageSigningKeySecretName=keys),
                                 settings.OSIMAGEURL: F.osimageurl()})
    found = settings.with_keys(found, {"cosign-old": key_secret("cosign-old"),
                                       "cosign-new": key_secret("cosign-new", PUB_NEW)})
    ann = {A.IMAGE: IMAGE, A.STATE: A.SUCCEEDED}
    if signed:
        ann[A.SIGNED] = signing.record(IMAGE, found.signing_keys)
    policies = [] if policy_pub is None else [{
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterImagePolicy", "metadata": {"name": "ocl-reconciler-images"},
        "spec": {"scopes": [F.REPO], "policy": {"rootOfTrust": {"policyType": "PublicKey", "publicKey": {
            "keyData": base64.b64encode(policy_pub).decode()}}, "signedIdentity": {"matchPolicy": "MatchRepository"}}}}]
    policy_json = json.dumps({"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {
        F.REPO: [{"type": "sigstoreSigned", "keyData": base64.b64encode(rendered_pub).decode(),
                  "signedIdentity": {"type": "matchRepository"}}]}}} if rendered_pub else {})
    base = good()
    return dataclasses.replace(base, settings=found, pools=[F.pool(annotations=ann)], image_policies=policies,
                               rendered_policies={"worker": policy_json})


def results(facts: P.Facts, check: str) -> list[tuple[str, str]]:
    return [(r.result, r.message) for r in lines(facts, check)]


def test_all_three_ok_when_the_policy_holds_our_key_everywhere():
    f = signed_facts()
    for check in ("image-policy", "policy-key", "rendered-policy"):
        assert [r for r, _ in results(f, check)] == [P.OK], results(f, check)


def test_no_policy_yet_is_a_warning_and_names_the_component():
    (line,) = lines(signed_facts(policy_pub=None), "image-policy")
    assert line.result == P.WARN and "kustomize/components/image-policy" in line.hint


def test_a_policy_over_an_unsigned_image_fails_naming_the_pool():
    (line,) = lines(signed_facts(signed=False), "image-policy")
    assert line.result == P.FAIL and "worker" in line.message


def test_a_policy_with_another_key_fails():
    (line,) = lines(signed_facts(policy_pub=PUB_NEW, rendered_pub=PUB_NEW), "policy-key")
    assert line.result == P.FAIL and "cosign-old" in line.message


def test_while_rotating_the_new_key_in_the_policy_is_one_the_builds_sign_with():
    f = signed_facts(policy_pub=PUB_NEW, rendered_pub=PUB_NEW, keys="cosign-old,cosign-new")
    assert [r for r, _ in results(f, "policy-key")] == [P.OK]
    assert [r for r, _ in results(f, "rendered-policy")] == [P.OK]


def test_a_rendered_config_without_the_requirement_warns():
    (line,) = lines(signed_facts(rendered_pub=None), "rendered-policy")
    assert line.result == P.WARN and "worker" in line.message


def test_signing_off_under_a_policy_fails():
    f = dataclasses.replace(signed_facts(), settings=good().settings)
    (line,) = lines(f, "image-policy")
    assert line.result == P.FAIL and "imageSigningKeySecretName" in line.hint
