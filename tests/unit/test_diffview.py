"""The diff view: unified YAML per object, server fields left out, secret values masked."""

from __future__ import annotations

import pytest

from reconcile.core.actions import PoolPlan
from reconcile.core.actions import Write as Action
from reconcile.diff import masking, view
from tests.support import factory as F


def test_secret_values_are_masked_like_kubectl():
    before = F.secret("s", payload={"auths": {"a": {"auth": "b2xk"}}})
    before["data"]["same"] = "c2FtZQ=="
    after = F.secret("s", payload={"auths": {"a": {"auth": "bmV3"}}})
    after["data"]["same"] = "c2FtZQ=="
    after["stringData"] = {"plain": "hunter2"}
    b, a = masking.mask_pair(before, after)
    assert b["data"] == {".dockerconfigjson": "*** (before)", "same": "***"}
    assert a["data"] == {".dockerconfigjson": "*** (after)", "same": "***"}
    assert a["stringData"] == {"plain": "***"}
    assert before["data"]["same"] == "c2FtZQ=="                      # inputs untouched


def test_diff_of_a_secret_patch_shows_change_but_no_value():
    live = F.secret("s", payload={"auths": {"old": {}}})
    new = F.secret("s", payload={"auths": {"new": {}}})
    plan = PoolPlan("worker", actions=[Action("patch", live, (), new)])
    text = view.unified([plan])
    assert "-  .dockerconfigjson: '*** (before)'" in text
    assert "+  .dockerconfigjson: '*** (after)'" in text
    assert live["data"][".dockerconfigjson"] not in text
    assert new["data"][".dockerconfigjson"] not in text


def test_server_fields_and_status_never_show():
    live = F.pool()
    live["metadata"]["managedFields"] = [{"manager": "kube"}]
    after = F.pool(annotations={"ocl-reconciler.io/state": "Pending"})
    after["metadata"]["resourceVersion"] = "999"
    after["status"] = {"changed": True}
    text = view.unified([PoolPlan("worker", actions=[Action("patch", live, (), after)])])
    changed = [line for line in text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["+    ocl-reconciler.io/state: Pending"]


def test_long_values_are_summarised_by_size_and_hash():
    cm = F.configmap("big", {"k": "x" * 10_000})
    text = view.unified([PoolPlan("worker", actions=[Action("create", cm)])])
    assert "k: <10000 bytes, sha256 " in text and "xxxx" not in text


def test_an_annotation_that_copies_a_secret_value_is_masked():
    """kubectl masks what mirrors a Secret's data: last-applied-configuration, and any annotation
    holding one of its values (as stored or decoded)."""
    import base64
    import json
    token = "s3cr3t-token-value"
    live = F.secret("s", payload={"auths": {}})
    live["data"]["token"] = base64.b64encode(token.encode()).decode()
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"data": live["data"]}),
        "example.com/copied": f"token={token}", "example.com/plain": "nothing secret here"}
    new = F.secret("s", payload={"auths": {"x": {}}})
    new["data"]["token"] = live["data"]["token"]
    new["metadata"]["annotations"] = dict(live["metadata"]["annotations"])
    text = view.unified([PoolPlan("worker", actions=[Action("patch", live, (), new)])])
    assert token not in text and live["data"]["token"] not in text
    assert "nothing secret here" in text                      # what mirrors nothing is shown
    b, _ = masking.mask_pair(live, new)
    assert b["metadata"]["annotations"]["example.com/copied"] == "***"


@pytest.mark.parametrize("value, masked", [
    ("http://user:p@ss@proxy:3128", "http://***@proxy:3128"),
    ("http://a@b@c:d@proxy.example.com:3128/", "http://***@proxy.example.com:3128/"),
    ("http://user:p@ss@proxy:3128/path@x?q=a@b#f@g", "http://***@proxy:3128/path@x?q=a@b#f@g"),
    ("http://u:p@a:1,http://v:q@w@b:2", "http://***@a:1,http://***@b:2"),
    ("RUN curl -fo /x http://u:s3@cr3t@mirror/x y@z", "RUN curl -fo /x http://***@mirror/x y@z"),
    ("http://proxy:3128/?q=a@b", "http://proxy:3128/?q=a@b"),
    ("http://proxy:3128#frag@x", "http://proxy:3128#frag@x"),
    ("http://proxy:3128?q=a@b", "http://proxy:3128?q=a@b"),
])
def test_a_urls_userinfo_runs_to_the_last_at_sign_of_its_authority(value, masked):
    """Go's net/url (`parseAuthority`: `strings.LastIndex(authority, "@")`, the authority being
    what follows `//` up to `/`, once the fragment `#` and the query `?` are cut off) and curl take
    the userinfo to the LAST `@`: a password may hold `@`, and the proxy still works. Masking at the
    first one left the rest of the password in `diff`."""
    from reconcile.imagebuild import proxy
    _, after = masking.mask_pair(None, F.configmap("c", {"k": value}))
    assert after["data"]["k"] == masked
    assert proxy.credentialed(value) == (masked != value)
