"""The command line contract: subcommands, exit codes, outputs, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reconcile.cluster import snapshot
from reconcile.contract import annotations as A
from reconcile.contract import yamlio
from tests.support import factory as F


def test_diff_exits_1_with_changes_and_0_after_run(run_cli):
    src = run_cli.write(F.cluster())
    code, out, _ = run_cli("diff", "--snapshot", str(src))
    assert code == 1
    assert "===== create core/ConfigMap ocl-reconciler/ocl-dockerfile-worker-" in out
    assert "===== create core/Pod ocl-reconciler/ocl-build-worker-" in out
    assert "+    ocl-reconciler.io/state: Pending" in out
    assert out.rstrip().endswith("3 to create, 1 to patch, 0 to delete; pools: worker - -> Pending")
    code, after, _ = run_cli.run(F.cluster())
    code, out, _ = run_cli("diff", "--snapshot", str(run_cli.write(after)))
    assert (code, out) == (0, "")


def test_diff_makes_no_writes(run_cli):
    src = run_cli.write(F.cluster())
    before = src.read_text()
    run_cli("diff", "--snapshot", str(src))
    assert src.read_text() == before


def test_render_prints_only_manifests(run_cli):
    src = run_cli.write(F.cluster(F.pool("worker"), F.pool("infra")))
    code, out, err = run_cli("render", "--snapshot", str(src))
    assert code == 0 and err == ""
    docs = yamlio.load_all(out)
    assert [(d["kind"], d["metadata"]["name"].split("-")[1]) for d in docs] == [
        ("ConfigMap", "dockerfile"), ("ConfigMap", "mc"), ("Pod", "build")] * 2
    assert {d["metadata"]["labels"]["ocl-reconciler.io/pool"] for d in docs} == {"worker", "infra"}


def test_render_reports_blocked_pools_on_stderr(run_cli):
    items = [o for o in F.cluster() if o["kind"] != "MachineConfig"]
    code, out, err = run_cli("render", "--snapshot", str(run_cli.write(items)))
    assert (code, out) == (2, "")
    assert err == "error: pool worker: MachineConfig rendered-worker-1 not found\n"


def test_status_table(run_cli, monkeypatch):
    after = run_cli.run(F.cluster(F.pool("worker"), F.pool("master", opted_in=False)))[1]
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T14:05:00Z")
    code, out, _ = run_cli("status", "--snapshot", str(run_cli.write(after)))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["POOL", "RENDERED", "STATE", "ROLLOUT", "IMAGE", "AGE", "MESSAGE"]
    assert lines[1].split() == ["worker", "rendered-worker-1", "Pending", "-", "<none>", "2h"]
    assert len(lines) == 2                                 # master is not opted in


@pytest.mark.parametrize("content, message", [
    ("- just\n- a list\n", "expected a Kubernetes object, got list"),
    ("kind: [unclosed\n", "is not valid YAML at line"),
    ("kind: ConfigMap\nmetadata: {}\n", "an object without kind or metadata.name"),
])
def test_unreadable_snapshot_is_fatal(run_cli, tmp_path, content, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    for command in ("run", "diff", "render", "status"):
        code, out, err = run_cli(command, "--snapshot", str(bad))
        assert code == 3
        assert out == ""
        assert err.startswith("error: snapshot ") and message in err and err.count("\n") == 1


def test_missing_snapshot_file_and_no_cluster_are_fatal(run_cli, tmp_path):
    code, _, err = run_cli("run", "--snapshot", str(tmp_path / "nope.yaml"))
    assert code == 3 and "No such file or directory" in err
    code, _, err = run_cli("status", "--kubeconfig", str(tmp_path / "missing-kubeconfig"))
    assert (code, err) == (3, f"error: kubeconfig {tmp_path / 'missing-kubeconfig'} not found\n")


def test_snapshot_from_stdin_and_multi_document_stream(run_cli, monkeypatch):
    import io
    stream = yamlio.dump_all(F.cluster())
    monkeypatch.setattr(sys, "stdin", io.StringIO(stream))
    code, out, _ = run_cli("diff", "--snapshot", "-")
    assert code == 1 and "to create" in out


def test_write_snapshot_to_stdout_is_a_list(run_cli):
    src = run_cli.write(F.cluster())
    code, out, _ = run_cli("run", "--snapshot", str(src), "--write-snapshot", "-")
    assert code == 0
    doc = yamlio.load(out)
    assert doc["kind"] == "List"
    assert F.the_pool(doc["items"])["metadata"]["annotations"][A.STATE] == A.PENDING


def test_json_logs_are_one_object_per_line(run_cli):
    import json
    src = run_cli.write(F.cluster())
    code, _, err = run_cli("run", "--snapshot", str(src), "--log-format", "json")
    assert code == 0
    entries = [json.loads(line) for line in err.splitlines()]
    assert {"create", "patch"} <= {e["msg"].split()[0] for e in entries}
    assert all(e["level"] == "info" and e.get("pool") == "worker" for e in entries[:-1])
    assert entries[-1]["msg"].startswith("run done: pools 1 Pending; 3 created, 1 patched, 0 deleted")


def test_no_secret_value_in_any_output(run_cli):
    items = F.cluster()
    secret_value = F.find(items, "Secret", "push-secret")[0]["data"][".dockerconfigjson"]
    src = run_cli.write(items)
    outputs = []
    for command in ("diff", "render", "status", "run"):
        code, out, err = run_cli(command, "--snapshot", str(src))
        outputs.append(out + err)
    assert all(secret_value not in o and "s3cr3t" not in o for o in outputs)


def test_python_m_and_help():
    out = subprocess.run([sys.executable, "-m", "reconcile", "--help"], capture_output=True,
                         text=True, cwd=F.ROOT, check=True).stdout
    for word in ("run", "diff", "render", "status", "COMMAND --help"):
        assert word in out
    sub = subprocess.run([sys.executable, "-m", "reconcile", "run", "--help"], capture_output=True,
                         text=True, cwd=F.ROOT, check=True).stdout
    assert "--write-snapshot" in sub and "--snapshot" in sub
    bad = subprocess.run([sys.executable, "-m", "reconcile", "frobnicate"], capture_output=True,
                         text=True, cwd=F.ROOT)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_help_does_not_import_heavy_modules():
    code = ("import sys; from reconcile import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('kubernetes', 'jinja2', 'yaml', 'jsonpatch', 'deepdiff') if m in sys.modules]\n"
            "print('heavy=' + ','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=F.ROOT,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "heavy="


def test_bad_now_is_fatal(run_cli, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "yesterday")
    code, _, err = run_cli("status", "--snapshot", str(run_cli.write(F.cluster())))
    assert code == 3 and "OCL_RECONCILE_NOW" in err


def test_second_run_on_run_output_is_byte_identical(run_cli, tmp_path):
    first = tmp_path / "first.yaml"
    second = tmp_path / "second.yaml"
    src = run_cli.write(F.cluster(F.pool("worker"), F.pool("infra")))
    assert run_cli("run", "--snapshot", str(src), "--write-snapshot", str(first))[0] == 0
    assert run_cli("run", "--snapshot", str(first), "--write-snapshot", str(second))[0] == 0
    assert first.read_bytes() == second.read_bytes()
    assert snapshot.load(str(first))


@pytest.mark.parametrize("command", ["run", "diff", "render", "status"])
def test_each_command_help_has_a_description_and_its_exit_codes(run_cli, command):
    from reconcile import cli
    with pytest.raises(SystemExit) as done:
        run_cli(command, "--help")
    assert done.value.code == 0
    out = run_cli.capsys.readouterr().out
    description, codes = cli.COMMAND_HELP[command]
    assert " ".join(description.split()[:6]) in " ".join(out.split())
    assert "exit codes: 0 " in " ".join(out.split())


def test_status_rejects_a_flag_it_does_not_use(run_cli):
    """Pools are cluster-scoped: `status -n` would be a flag that silently does nothing."""
    with pytest.raises(SystemExit) as done:
        run_cli("status", "-n", "elsewhere", "--snapshot", str(run_cli.write(F.cluster())))
    assert done.value.code == 2


@pytest.mark.parametrize("command", ["diff", "render", "status"])
def test_only_run_logs_progress_by_default(run_cli, command):
    """As kubectl diff: stdout has the result, stderr stays empty unless something is wrong."""
    snap = str(run_cli.write(F.cluster()))
    code, out, err = run_cli(command, "--snapshot", snap)
    assert out and err == "", err
    code, _, err = run_cli("run", "--snapshot", snap)
    assert "run done: " in err                                  # run says what it did


def test_the_epilog_example_does_not_export_secrets():
    from reconcile import cli
    examples = cli.EPILOG.split("examples:", 1)[1]
    assert "secret" not in examples


def test_status_with_no_pool_opted_in_says_so_and_how(run_cli):
    """Issue 29 item 15: not a bare header. Like kubectl's "No resources found", on stderr, exit 0."""
    items = F.cluster(F.pool("worker", opted_in=False))
    code, out, err = run_cli.on(items, "status")
    assert code == 0 and out == ""
    assert f"no MachineConfigPool is labelled {A.LAYERING_LABEL}" in err
    assert f"oc label mcp/worker {A.LAYERING_LABEL}=" in err
