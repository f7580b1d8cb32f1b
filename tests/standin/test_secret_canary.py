"""Secret canary: every Secret in the cluster holds a unique canary value; a full lifecycle through
every command (with -v and JSON logs) must never show one outside a Secret object."""

from __future__ import annotations

import base64
import json

import kubelet
import pytest

from reconcile.cluster import snapshot
from tests.support import factory as F
from tests.support.apiserver import APIServer
from tests.unit.test_builders import labelled

CANARIES = [f"canary-{i}-7f3a9c" for i in range(6)]


def secrets_with_canaries():
    pull = F.secret("pull-secret", type_="kubernetes.io/dockercfg", key=".dockercfg",
                    payload={"quay.io": {"auth": base64.b64encode(f"u:{CANARIES[0]}".encode()).decode(),
                                         "password": CANARIES[0]}})
    push = F.secret("push-secret", payload={"auths": {"r.local": {"auth": CANARIES[1], "password": CANARIES[1]}}})
    proxy = labelled("Secret", "proxy", "proxy", {"https_proxy": f"http://u:{CANARIES[2]}@p:3128"})
    ent = labelled("Secret", "rhsm", "entitlement", {"1.pem": CANARIES[3]})
    mirror = labelled("Secret", "mirror", "pull-secret", {})
    mirror["data"] = {".dockerconfigjson": base64.b64encode(json.dumps(
        {"auths": {"mirror.local": {"auth": CANARIES[4]}}}).encode()).decode()}
    unknown = labelled("Secret", "mystery", "aws", {"key": CANARIES[5]})
    return [pull, push, proxy, ent, mirror, unknown]


def forms(items):
    """Every way a canary could leak: the raw values and every Secret data value as stored."""
    out = set(CANARIES)
    for obj in items:
        if obj.get("kind") == "Secret":
            out |= {v for v in (obj.get("data") or {}).values() if len(v) > 8}
    return out


def leaks(text, secret_forms):
    return sorted(f for f in secret_forms if f in text)


def outside_secrets(items):
    return json.dumps([o for o in items if o.get("kind") != "Secret"])


@pytest.mark.parametrize("builder_type", sorted(F.BUILD_KINDS))
@pytest.mark.parametrize("mode", ["snapshot", "api"])
def test_no_canary_leaks_through_a_full_lifecycle(run_cli, builder_type, mode, monkeypatch, tmp_path):
    monkeypatch.setattr(F, "BUILDER", builder_type)
    items = F.cluster(settings=[F.build_config(), F.osimageurl()] + secrets_with_canaries())
    watched = forms(items)
    steps = [None, "Running", "Succeeded", "rebuild", "Failed"]
    for step in steps:
        if step in ("Running", "Succeeded", "Failed"):
            for obj in items:
                if obj["kind"] in ("Pod", "Build"):
                    kubelet.set_phase(obj, step)
        elif step == "rebuild":
            F.the_pool(items)["metadata"]["annotations"]["ocl-reconciler.io/rebuild"] = "again"
        watched |= forms(items)
        outputs = []
        if mode == "snapshot":
            src = run_cli.write(items)
            target = ["--snapshot", str(src)]
        else:
            server = APIServer(items).start()
            target = ["--kubeconfig", server.kubeconfig(tmp_path / "kc")]
        try:
            for command in ("diff", "render", "status"):
                for logging in (["-v"], ["-v", "--log-format", "json"]):
                    code, out, err = run_cli(command, *target, *logging)
                    assert code in (0, 1, 2), (command, err)
                    outputs.append(out + err)
            out_file = tmp_path / "after.yaml"
            extra = ["--write-snapshot", str(out_file)] if mode == "snapshot" else []
            code, out, err = run_cli("run", *target, "-v", "--log-format", "json", *extra)
            assert code == 0, err
            outputs.append(out + err)
            items = snapshot.load(str(out_file)) if mode == "snapshot" else server.items()
            if mode == "snapshot":
                outputs.append(outside_secrets(items))
        finally:
            if mode == "api":
                server.stop()
        watched |= forms(items)
        for text in outputs:
            assert leaks(text, watched) == [], step
        assert leaks(outside_secrets(items), watched) == [], step
    own = [o for o in items if o["kind"] == "Secret" and "ocl-reconciler" in json.dumps(o["metadata"].get("labels", {}))]
    assert own, "the scenario must have made a Secret of ours, or it tests nothing"
