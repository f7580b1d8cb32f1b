"""Build inputs and registry auth through the CLI, on snapshots and on the test API server."""

from __future__ import annotations

import base64
import copy
import json

import kubelet

from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.unit.test_builders import INPUTS, dockercfg_secret, labelled


def ann(items):
    return F.the_pool(items)["metadata"]["annotations"]


def test_inputs_reach_the_build_and_unknown_ones_are_named(any_cli):
    mystery = labelled("Secret", "mystery", "aws", {"k": "v"})
    code, after, _ = any_cli.run(F.cluster(extra=copy.deepcopy(INPUTS) + [mystery]))
    assert code == 0
    a = ann(after)
    assert a[A.STATE] == A.PENDING
    assert a[A.MESSAGE].startswith(f"skipped Secret/{F.NS}/mystery: unknown build-input type 'aws'")
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    sources = {v.get("secret", {}).get("secretName") or v.get("configMap", {}).get("name")
               for v in pod["spec"]["volumes"]}
    assert {"corp-ca", "rhsm", "repos"} <= sources and "mystery" not in sources
    # the note stays while the build runs
    running = copy.deepcopy(after)
    for obj in running:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Running")
    code, building, _ = any_cli.run(running)
    assert ann(building)[A.STATE] == A.BUILDING and ann(building)[A.MESSAGE] == a[A.MESSAGE]


def test_clashing_inputs_block_naming_both(any_cli):
    twin = labelled("Secret", "rhsm2", "entitlement", {"a.pem": "x"})
    code, after, _ = any_cli.run(F.cluster(extra=copy.deepcopy(INPUTS) + [twin]))
    assert code == 2
    assert ann(after)[A.MESSAGE] == (f"build inputs Secret/{F.NS}/rhsm and Secret/{F.NS}/rhsm2 both set "
                                    "path /etc/pki/entitlement")
    assert F.owned(after) == []


def test_legacy_pull_secret_is_converted_and_follows_its_source(any_cli):
    settings = [F.build_config(), F.osimageurl(),
                dockercfg_secret("pull-secret", {"quay.io": {"auth": "b2xkOm9sZA=="}}), F.secret("push-secret")]
    code, started, _ = any_cli.run(F.cluster(settings=settings))
    assert code == 0
    (own,) = [o for o in F.owned(started) if o["kind"] == "Secret"]
    assert json.loads(base64.b64decode(own["data"][".dockerconfigjson"])) == {
        "auths": {"quay.io": {"auth": "b2xkOm9sZA=="}}}
    done = copy.deepcopy(started)
    for obj in done:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Succeeded")
    done = any_cli.run(done)[1]
    assert F.owned(done) == []                                   # cleaned up with the build
    source = F.find(done, "Secret", "pull-secret")[0]
    source["data"][".dockercfg"] = base64.b64encode(json.dumps({"quay.io": {"auth": "bmV3Om5ldw=="}}).encode()).decode()
    F.the_pool(done)["metadata"]["annotations"][A.REBUILD] = "new-credentials"
    code, rebuilt, _ = any_cli.run(done)
    (own,) = [o for o in F.owned(rebuilt) if o["kind"] == "Secret"]
    assert json.loads(base64.b64decode(own["data"][".dockerconfigjson"])) == {
        "auths": {"quay.io": {"auth": "bmV3Om5ldw=="}}}
