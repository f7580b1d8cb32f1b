"""Parts of issue 31 (only the reconciler decides what the nodes boot): a snapshot file holds every
Secret, so it is written 0600 (row 8); proxy credentials in a build's env are masked in `diff` as
Secret values are (row 9); an image history entry another user wrote is never reused unless it is an
image of the configured repository (row 3)."""

from __future__ import annotations

import base64
import copy
import json
import stat

import pytest
import yaml

from reconcile.contract import annotations as A
from tests.support import factory as F

pytestmark = pytest.mark.usefixtures("builder")


def test_a_written_snapshot_is_readable_by_its_owner_only(run_cli, tmp_path):
    out = tmp_path / "after.yaml"
    code, _, err = run_cli("run", "--snapshot", str(run_cli.write(F.cluster())), "--write-snapshot", str(out))
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def proxied(items, url):
    items = copy.deepcopy(items)
    items.append({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
                  "spec": {"httpProxy": url, "httpsProxy": url}, "status": {"httpProxy": url, "httpsProxy": url}})
    return items


CREDENTIALED = "http://proxyuser:s3cr3t-proxy@proxy.example.com:3128"


def test_proxy_credentials_never_reach_diff_output(run_cli):
    items = proxied(F.cluster(), CREDENTIALED)
    code, out, _ = run_cli.on(items, "diff", "--color", "never")
    assert code == 1 and "s3cr3t-proxy" not in out and "proxyuser" not in out, out[-500:]
    code, out, _ = run_cli.on(items, "diff", "-o", "json")
    assert "s3cr3t-proxy" not in out and "proxyuser" not in out


def test_proxy_credentials_never_reach_render_output_and_what_it_prints_still_works(run_cli, builder):
    """render's stdout is applied by Argo CD (its Config Management Plugin), so a masked value there
    would be applied as the proxy: the credentials travel by reference instead. The build Pod takes
    a proxy URL with credentials from a Secret of ours (secretKeyRef; render names the Secret on
    stderr, run creates it with the real value); an OpenShift Build gets none (build args take values
    only) and relies on the cluster Proxy its build controller adds to the build Pod itself."""
    items = proxied(F.cluster(), CREDENTIALED)
    code, out, err = run_cli.on(items, "render")
    assert code == 0, err
    assert "s3cr3t-proxy" not in out + err and "proxyuser" not in out + err
    docs = [d for d in yaml.safe_load_all(out) if d]
    build = next(d for d in docs if d["kind"] == builder)
    code, after, _ = run_cli.run(items)
    assert code == 0
    if builder == "Pod":
        env = {e["name"]: e for e in build["spec"]["containers"][0]["env"]}
        (secret,) = [o for o in F.owned(after) if o["kind"] == "Secret" and
                     o["metadata"]["name"] == env["HTTPS_PROXY"]["valueFrom"]["secretKeyRef"]["name"]]
        for var in ("HTTP_PROXY", "https_proxy"):
            key = env[var]["valueFrom"]["secretKeyRef"]["key"]
            assert base64.b64decode(secret["data"][key]).decode() == CREDENTIALED
        assert f"Secret/{F.NS}/{secret['metadata']['name']} not shown" in err
    else:
        args = {a["name"] for a in build["spec"]["strategy"]["dockerStrategy"]["buildArgs"]}
        assert not args & {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}, args
        message = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
        assert "skipped env HTTPS_PROXY from the cluster Proxy" in message, message
    created = [o for o in F.owned(after) if o["kind"] != "Secret"]
    assert "s3cr3t-proxy" not in json.dumps(created)


def test_render_leaves_out_any_object_holding_a_urls_credentials(run_cli):
    """Masked, it would be applied broken by Argo CD: it is named on stderr, as a Secret is."""
    items = F.cluster(extra=[F.configmap("on-cluster-build-custom-dockerfile",
                                         {"worker": "RUN curl -fo /x http://u:s3cr3t-dockerfile@mirror/x\n"})])
    code, out, err = run_cli.on(items, "render")
    assert code == 0 and "s3cr3t-dockerfile" not in out + err, err
    assert not [d for d in yaml.safe_load_all(out) if d and "Dockerfile" in (d.get("data") or {})]
    assert "ConfigMap/ocl-reconciler/ocl-dockerfile-worker-" in err, err
    assert "not shown: it holds credentials" in err


def test_a_history_entry_outside_the_configured_repository_is_not_reused(run_cli):
    """Someone who may patch pools writes `<build id>=<another registry>/evil/os@sha256:...` for the build
    id the pool needs: the run builds instead of handing that image to the nodes, and says why."""
    items = F.cluster()
    code, started, _ = run_cli.run(items)
    build_id = F.owned(started, "worker")[0]["metadata"]["labels"]["ocl-reconciler.io/build-id"]
    evil = "evil.example.com/pwn/os@sha256:" + "6" * 64
    items = copy.deepcopy(items)
    F.the_pool(items)["metadata"]["annotations"][A.IMAGES] = f"{build_id}={evil}"
    code, out, _ = run_cli.on(items, "diff", "-o", "json")
    plan = json.loads(out)["pools"][0]
    assert plan["transition"] == "START" and evil not in json.dumps(plan["actions"])
    code, after, err = run_cli.run(items)
    assert code == 0 and F.the_pool(after)["metadata"]["annotations"][A.STATE] == A.PENDING, err
    assert A.IMAGE not in F.the_pool(after)["metadata"]["annotations"]
    assert err.count(f"WARNING pool worker: not reused: {evil} is not in the configured repository {F.REPO}") == 1


@pytest.mark.parametrize("builder", ["custom-pod-builder"], indirect=True)   # an OpenShift Build runs no script of ours
def test_render_does_not_leave_out_the_build_pod_for_its_own_scripts_text(run_cli, monkeypatch, builder):
    """The build script is ours, not a value a user gave: a URL with userinfo in its text (a comment,
    say) does not make render drop the Pod."""
    from reconcile.imagebuild import templates
    real = templates.source

    def source(name):
        return real(name) + ("\n# e.g. http://user:example@proxy.example.com:3128\n" if name == "build-pod.sh" else "")
    monkeypatch.setattr(templates, "source", source)
    code, out, err = run_cli.on(F.cluster(), "render")
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out) if d and d["kind"] == "Pod"] == ["Pod"], err
    assert "not shown: it holds credentials" not in err


def test_a_password_holding_an_at_sign_is_masked_whole_in_diff(run_cli):
    """Go's net/url and curl end the userinfo at the authority's last `@` (net/url `parseAuthority`):
    `http://u:s3cr3t@tail@mirror/x` is user `u`, password `s3cr3t@tail`, host `mirror`. No part of the
    password reaches `diff`, and render leaves the object out."""
    items = F.cluster(extra=[F.configmap("on-cluster-build-custom-dockerfile",
                                         {"worker": "RUN curl -fo /x http://u:s3cr3t@tail-dockerfile@mirror/x\n"})])
    code, out, _ = run_cli.on(items, "diff", "--color", "never")
    assert code == 1 and "http://***@mirror/x" in out and "tail-dockerfile" not in out, out[-800:]
    code, out, _ = run_cli.on(items, "diff", "-o", "json")
    assert "tail-dockerfile" not in out
    code, out, err = run_cli.on(items, "render")
    assert code == 0 and "tail-dockerfile" not in out + err, err


def _running_build(run_cli) -> tuple[list[dict], dict]:
    code, items, err = run_cli.run(F.cluster())
    assert code == 0, err
    (pod,) = [o for o in F.owned(items) if o["kind"] == "Pod"]
    return items, pod


def _printed_pod(run_cli, items) -> dict:
    code, out, err = run_cli.on(items, "render")
    assert code == 0, err
    (printed,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Pod"]
    return printed


@pytest.mark.parametrize("builder", ["custom-pod-builder"], indirect=True)
def test_render_prints_a_live_pod_with_its_older_script_and_the_servers_defaults_as_rendered(run_cli, builder):
    """A build Pod an earlier version made runs an older build-pod.sh; the server added its defaults
    (terminationMessagePath, dnsPolicy: kubernetes pkg/apis/core/v1/defaults.go). render prints the
    command it runs, and everything else as rendered."""
    items, pod = _running_build(run_cli)
    rendered = copy.deepcopy(pod["spec"])
    pod["spec"]["dnsPolicy"] = "ClusterFirst"
    pod["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
    pod["spec"]["containers"][0]["command"][-1] = "# an earlier version's script\nexit 0\n"
    printed = _printed_pod(run_cli, items)
    assert printed["spec"]["containers"][0]["command"][-1] == "# an earlier version's script\nexit 0\n"
    printed["spec"]["containers"][0]["command"] = rendered["containers"][0]["command"]
    assert printed["spec"] == rendered


@pytest.mark.parametrize("builder", ["custom-pod-builder"], indirect=True)
def test_render_never_prints_someone_elses_pod_under_the_builds_name(run_cli, builder):
    """A labelled Pod under the build's name, made by someone who may create Pods here: another
    ServiceAccount, a hostPath volume, a command holding a credential. render prints our Pod as
    rendered, never that spec, and no credential."""
    items, pod = _running_build(run_cli)
    rendered = copy.deepcopy(pod["spec"])
    pod["spec"]["serviceAccountName"] = "someone-else"
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", "curl http://u:s3cret-cmd@evil.example.com/x"]
    code, out, err = run_cli.on(items, "render")
    assert code == 0 and "s3cret-cmd" not in out + err and "someone-else" not in out and "hostPath" not in out
    assert _printed_pod(run_cli, items)["spec"] == rendered
