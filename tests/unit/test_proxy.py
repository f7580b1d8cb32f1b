"""The cluster proxy and trust bundle reach both builders; the reconciler's own client honours
the standard proxy variables."""

from __future__ import annotations

import pytest

from reconcile import cli
from reconcile.contract import annotations as A
from tests.support import factory as F
from tests.support.apiserver import APIServer


def proxy_objects(trusted_ca="user-ca-bundle", key="ca-bundle.crt"):
    proxy = {"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
             "spec": {"trustedCA": {"name": trusted_ca}} if trusted_ca else {},
             "status": {"httpProxy": "http://proxy.example.com:3128", "httpsProxy": "http://proxy.example.com:3128",
                        "noProxy": ".cluster.local,.svc,10.0.0.0/16"}}
    bundle = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "user-ca-bundle", "namespace": "openshift-config"},
              "data": {key: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}
    return [proxy, bundle]


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_both_builders_get_the_proxy_and_trust_the_bundle(any_cli, monkeypatch, builder):
    monkeypatch.setattr(F, "BUILDER", builder)
    code, after, _ = any_cli.run(F.cluster(extra=proxy_objects()))
    assert code == 0
    (build,) = [o for o in F.owned(after) if o["kind"] == F.BUILD_KINDS[builder]]
    if builder == "custom-pod-builder":
        env = {e["name"]: e.get("value") for e in build["spec"]["containers"][0]["env"]}
        mounts = {m["mountPath"] for m in build["spec"]["containers"][0]["volumeMounts"]}
    else:
        docker = build["spec"]["strategy"]["dockerStrategy"]
        assert "env" not in docker                         # OpenShift would bake env into the image
        env = {e["name"]: e.get("value") for e in docker["buildArgs"]}
        mounts = {m["destinationPath"] for v in docker["volumes"] for m in v["mounts"]}
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy.example.com:3128"
    assert env["NO_PROXY"] == ".cluster.local,.svc,10.0.0.0/16"
    assert "/etc/ocl/inputs/cluster-ca" in mounts
    (ca,) = [o for o in F.owned(after) if o["kind"] == "ConfigMap" and "ca.crt" in o["data"]]
    assert ca["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    dockerfile = next(o for o in F.owned(after) if "Dockerfile" in o.get("data", {}))["data"]["Dockerfile"]
    assert "ocl-cluster-ca.crt" in dockerfile and "update-ca-trust" in dockerfile


def test_no_proxy_no_changes(any_cli):
    code, after, _ = any_cli.run(F.cluster())
    (pod,) = [o for o in F.owned(after) if o["kind"] == "Pod"]
    assert not any(e["name"].upper().endswith("_PROXY") for e in pod["spec"]["containers"][0]["env"])


def test_trust_bundle_without_its_key_blocks(any_cli):
    code, after, _ = any_cli.run(F.cluster(extra=proxy_objects(key="wrong-key")))
    assert code == 2
    assert F.the_pool(after)["metadata"]["annotations"][A.MESSAGE] == (
        "ConfigMap openshift-config/user-ca-bundle (Proxy cluster, spec.trustedCA) has no key 'ca-bundle.crt'")


def test_own_client_honours_the_proxy_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    with APIServer(F.cluster()) as target, APIServer(F.cluster()) as proxy:
        kubeconfig = target.kubeconfig(tmp_path / "kc")
        target_host = target.url.replace("http://127.0.0.1", "http://localhost")
        (tmp_path / "kc").write_text((tmp_path / "kc").read_text().replace(target.url, target_host))
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.org")
        assert cli.main(["status", "--kubeconfig", kubeconfig]) == 0
        # the pools, our MachineConfigs, every MachineConfig's metadata (stray ones)
        status_reads = ["machineconfigpools", "machineconfigs", "machineconfigs"]
        assert [r.resource for r in proxy.log] == status_reads and target.log == []
        monkeypatch.setenv("NO_PROXY", "localhost")
        assert cli.main(["status", "--kubeconfig", kubeconfig]) == 0
        assert [r.resource for r in target.log] == status_reads


@pytest.mark.parametrize("builder", sorted(F.BUILD_KINDS))
def test_a_labelled_proxy_input_reaches_each_builder_as_it_can(any_cli, monkeypatch, builder):
    """An OpenShift Build ignores valueFrom in buildArgs (openshift/openshift-docs
    modules/builds-strategy-docker-build-arguments.adoc): the Secret-backed input is skipped, said so,
    and the cluster Proxy's value stays; the build Pod takes it by reference."""
    from tests.unit.test_builders import labelled
    monkeypatch.setattr(F, "BUILDER", builder)
    corp = labelled("Secret", "corp-proxy", "proxy", {"https_proxy": "http://user:s3cr3t@corp:3128"})
    code, after, _ = any_cli.run(F.cluster(extra=proxy_objects() + [corp]))
    assert code == 0
    (build,) = [o for o in F.owned(after) if o["kind"] == F.BUILD_KINDS[builder]]
    message = F.the_pool(after)["metadata"]["annotations"][A.MESSAGE]
    if builder == "custom-pod-builder":
        env = {e["name"]: e for e in build["spec"]["containers"][0]["env"]}
        assert env["HTTPS_PROXY"]["valueFrom"] == {"secretKeyRef": {"name": "corp-proxy", "key": "https_proxy"}}
        assert message == ""
    else:
        args = build["spec"]["strategy"]["dockerStrategy"]["buildArgs"]
        assert all(set(a) == {"name", "value"} for a in args), args
        assert {a["name"]: a["value"] for a in args}["HTTPS_PROXY"] == "http://proxy.example.com:3128"
        assert message == ("skipped env HTTPS_PROXY from Secret/corp-proxy key https_proxy: Build build args "
                           "take values only, and a referenced value never goes into a manifest")
    assert "s3cr3t" not in str(after)


def test_build_args_other_than_the_predefined_are_declared_in_the_dockerfile(any_cli, monkeypatch):
    """buildah passes a build arg to RUN steps only where an ARG declares it; the proxy variables
    are predefined ARGs (Dockerfile reference, "Predefined ARGs")."""
    from tests.unit.test_builders import labelled
    monkeypatch.setattr(F, "BUILDER", "openshift-image-builder")
    ca = labelled("ConfigMap", "corp-ca", "internal-ca", {"ca.crt": "-----BEGIN CERTIFICATE-----"})
    code, after, _ = any_cli.run(F.cluster(extra=proxy_objects() + [ca]))
    assert code == 0
    (build,) = [o for o in F.owned(after) if o["kind"] == "Build"]
    names = {a["name"] for a in build["spec"]["strategy"]["dockerStrategy"]["buildArgs"]}
    assert "SSL_CERT_FILE" in names and "HTTPS_PROXY" in names
    dockerfile = next(o for o in F.owned(after) if "Dockerfile" in o.get("data", {}))["data"]["Dockerfile"]
    configs = dockerfile.split(" AS configs\n", 1)[1]
    assert configs.startswith("ARG SSL_CERT_FILE\n")
    assert "ARG HTTPS_PROXY" not in dockerfile
