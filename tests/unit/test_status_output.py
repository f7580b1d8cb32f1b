"""`status` as kubectl users expect it (issue 56): the default table within 120 columns on the bundled
example and `make demo`'s snapshots, `-o wide` as the old table was (the upgrade path), `-o json` and
`-o yaml` with the keys docs/contract.md lists, `-o name`, `--no-headers`, and `--check`'s codes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

import annotate  # examples/annotate.py
import kubelet  # examples/kubelet.py
import mco  # examples/mco.py
import pytest
import settings  # examples/settings.py

from reconcile import cli
from reconcile.contract import yamlio
from reconcile.output import shorten, statuslist
from tests.support import factory as F

NOW = "2026-11-29T12:00:00Z"
GOLDEN = F.ROOT / "tests/golden"


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, str]:
    """`make demo`'s snapshots up to run7.yaml, made as the Makefile makes them, by name."""
    d = tmp_path_factory.mktemp("demo")
    os.environ["OCL_RECONCILE_NOW"] = NOW
    snaps = {"cluster": str(F.ROOT / "examples/cluster.yaml")}

    def run(src: str, name: str) -> None:
        snaps[name] = str(d / f"{name}.yaml")
        assert _cli("run", "--snapshot", src, "--write-snapshot", snaps[name])[0] == 0

    def step(script, src: str, *args: str) -> str:
        out = str(d / f"{script.__name__}-{len(snaps)}.yaml")
        with contextlib.redirect_stdout(io.StringIO()):
            assert script.main([src, out, *args]) == 0
        return out
    try:
        run(snaps["cluster"], "run1")
        run(step(kubelet, snaps["run1"], "--pool", "worker=Succeeded", "--pool", "infra=Failed"), "run2")
        run(step(annotate, snaps["run2"], "infra", "ocl-reconciler.io/rebuild=1"), "run3")
        run(step(kubelet, snaps["run3"], "--pool", "infra=Succeeded"), "run4")
        run(step(settings, snaps["run4"], "rollout=machineconfig"), "run5")
        run(step(mco, snaps["run5"]), "run6")
        run(step(mco, snaps["run6"]), "run7")
    finally:
        del os.environ["OCL_RECONCILE_NOW"]
    return snaps


@pytest.fixture
def status(demo, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", NOW)
    return lambda name, *args: _cli("status", "--snapshot", demo[name], *args)


def columns(table: str) -> list[dict[str, str]]:
    """The rows of a table by its header's columns (a cell may hold spaces: `3/3 nodes`)."""
    header, *rows = table.splitlines()
    found = list(re.finditer(r"\S+", header))
    names, starts = [m.group() for m in found], [m.start() for m in found] + [None]
    return [{n: row[starts[i]:starts[i + 1]].strip() for i, n in enumerate(names)} for row in rows]


SNAPSHOTS = ["cluster", "run1", "run2", "run3", "run4", "run5", "run6", "run7"]


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_the_default_table_fits_120_columns(status, name):
    code, out = status(name)
    assert code == 0 and out
    assert max(len(line) for line in out.splitlines()) <= shorten.WIDTH == 120
    for row in columns(out):
        assert row["IMAGE"] == "<none>" or re.fullmatch(r"os-image@sha256:[0-9a-f]{12}", row["IMAGE"]), row


def test_the_demos_last_table_is_short_and_wide_keeps_everything(status):
    out = status("run7")[1].splitlines()
    assert out[0].split() == ["POOL", "RENDERED", "STATE", "ROLLOUT", "IMAGE", "AGE", "MESSAGE"]
    items = json.loads(status("run7", "-o", "json")[1])["items"]
    for line, row, item in zip(out[1:], columns(status("run7")[1]), items, strict=True):
        assert row["POOL"] == item["name"] and item["rendered"] == f"rendered-{item['name']}-" + (
            item["rendered"].rsplit("-", 1)[1]) and item["rendered"].rsplit("-", 1)[1].startswith(row["RENDERED"])
        assert len(row["RENDERED"]) == 12 and item["rendered"] not in line    # not repeated in MESSAGE
        assert item["image"].rsplit("/", 1)[1].startswith(row["IMAGE"]) and len(row["IMAGE"]) == 28
    wide = status("run7", "-o", "wide")[1]
    assert all(i["image"] in wide and i["message"] in wide
               for i in json.loads(status("run7", "-o", "json")[1])["items"])


@pytest.mark.parametrize("name", ["run2", "run7"])
def test_wide_is_the_old_output_and_the_old_image_column_is_in_wide_and_json(status, name):
    """The upgrade path: main's `status -o wide` and `status` before issue 56 (tests/golden, made by
    main's CLI on these snapshots with the same clock)."""
    assert status(name, "-o", "wide")[1] == (GOLDEN / f"status-wide-{name}.txt").read_text()
    old = columns((GOLDEN / f"status-table-{name}.txt").read_text())
    wide = columns(status(name, "-o", "wide")[1])
    for column in ("POOL", "RENDERED", "STATE", "ROLLOUT", "IMAGE", "AGE", "MESSAGE"):
        assert [r[column] for r in wide] == [r[column] for r in old]
    old_images = [r["IMAGE"] for r in old]
    items = json.loads(status(name, "-o", "json")[1])["items"]
    assert [i["image"] or "<none>" for i in items] == old_images


def documented_keys() -> list[str]:
    """The keys docs/contract.md's "What status shows" lists, in order."""
    text = (F.ROOT / "docs/contract.md").read_text()
    section = text.split("## What status shows", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


def test_the_json_has_exactly_the_documented_keys(status):
    keys = documented_keys()
    assert len(keys) >= 10
    text = (F.ROOT / "docs/contract.md").read_text()
    for name in SNAPSHOTS:
        doc = json.loads(status(name, "-o", "json")[1])
        assert f'"apiVersion": "{doc["apiVersion"]}", "kind": "{doc["kind"]}"' in " ".join(text.split())
        assert list(doc) == ["apiVersion", "kind", "items"] and doc["items"]
        for item in doc["items"]:
            assert list(item) == keys
            assert item["verdict"] in (statuslist.DONE, statuslist.PROGRESSING, statuslist.FAILED,
                                       statuslist.IGNORED)


def test_the_json_is_the_tables_rows_and_yaml_the_same_document(status):
    for name in ("run2", "run7"):
        doc = json.loads(status(name, "-o", "json")[1])
        assert yamlio.load(status(name, "-o", "yaml")[1]) == doc
        wide = columns(status(name, "-o", "wide")[1])
        assert [i["name"] for i in doc["items"]] == [r["POOL"] for r in wide]
        assert [i["state"] for i in doc["items"]] == [r["STATE"] for r in wide]
        assert [i["rollout"] or "-" for i in doc["items"]] == [r["ROLLOUT"] for r in wide]
    (infra, worker) = json.loads(status("run2", "-o", "json")[1])["items"]
    assert (infra["state"], infra["image"], infra["verdict"]) == ("Failed", None, "failed")
    assert infra["message"].startswith("build Pod/ocl-reconciler/ocl-build-infra-")
    assert (worker["state"], worker["rollout"], worker["verdict"]) == ("Succeeded", None, "done")
    assert worker["transitionTime"] == NOW and worker["age"] == "0s" and worker["arch"] == "amd64"
    never = json.loads(status("cluster", "-o", "json")[1])["items"]
    assert [(i["state"], i["age"], i["transitionTime"], i["verdict"]) for i in never] == [
        (None, None, None, "progressing")] * 2                    # opted in, no run recorded anything


def test_name_and_no_headers_as_kubectl(status):
    code, out = status("run7", "-o", "name")
    assert (code, out) == (0, "machineconfigpool.machineconfiguration.openshift.io/infra\n"
                              "machineconfigpool.machineconfiguration.openshift.io/worker\n")
    for output in ("table", "wide"):
        full = status("run7", "-o", output)[1].splitlines()
        bare = status("run7", "-o", output, "--no-headers")[1].splitlines()
        assert [r.split() for r in bare] == [r.split() for r in full[1:]]     # widths from the rows only


@pytest.mark.parametrize("name, code", [
    ("run4", 0),            # both pools Succeeded, rollout: annotation
    ("run2", 4),            # infra Failed
    ("run1", 5),            # both Pending
    ("cluster", 5),         # opted in, never run
    ("run7", 5),            # the MCO rolls the image out: 3/3 nodes, the pool not yet on it
])
def test_check_exit_codes(status, name, code):
    assert status(name, "--check")[0] == code
    assert status(name)[0] == 0                                # without --check: shown
    assert status(name, "-o", "json", "--check")[0] == code


def test_check_on_an_unreadable_snapshot_is_still_3(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    assert _cli("status", "--check", "--snapshot", str(bad))[0] == 3


@pytest.mark.parametrize("state, rolled, verdict", [
    ("Succeeded", "rolled out", "done"), ("Succeeded", "-", "done"),
    ("Succeeded", "rolled out; paused by an administrator", "done"),
    ("Inherited", "merged, unchecked", "done"), ("Inherited", "rendering", "progressing"),
    ("Succeeded", "2/5 nodes", "progressing"), ("Succeeded", "unchecked", "progressing"),
    ("Succeeded", "held", "progressing"), ("Building", "-", "progressing"), ("<none>", "-", "progressing"),
    ("Failed", "-", "failed"), ("Interrupted", "-", "failed"), ("Blocked (recorded Succeeded)", "-", "failed"),
    ("Succeeded", "overridden by zz-os", "failed"), ("Inherited", "render failed", "failed"),
    ("OptedOut", "-", "ignored"),
])
def test_verdicts(state, rolled, verdict):
    assert statuslist.verdict(("p", "r", state, rolled)) == verdict


def test_exit_code_takes_the_worst_row():
    rows = [("a", "r", "Succeeded", "-"), ("b", "r", "Building", "-"), ("c", "r", "Failed", "-")]
    assert statuslist.exit_code(rows) == statuslist.EXIT_FAILED == 4
    assert statuslist.exit_code(rows[:2]) == statuslist.EXIT_PROGRESSING == 5
    assert statuslist.exit_code(rows[:1]) == statuslist.exit_code([]) == 0


def test_short_cells():
    digest = "sha256:" + "ab" * 32
    assert shorten.image(f"registry.example.com:5000/ns/os-image@{digest}") == "os-image@sha256:" + "ab" * 6
    assert shorten.image("quay.io/a/b:v1") == "b:v1"
    assert shorten.image("<none>") == "<none>"
    assert shorten.rendered("worker", "rendered-worker-" + "0f" * 16) == "0f" * 6
    assert shorten.rendered("worker", "rendered-infra-" + "0f" * 16) == "rendered-infra-" + "0f" * 16
    assert shorten.rendered("worker", "rendered-worker-1") == "rendered-worker-1"
    assert shorten.message("rendered-w-1 has the image of x", "rendered-w-1") == "has the image of x"
    assert shorten.message("a message", "rendered-w-1") == "a message"
    assert shorten.cut("short", 20) == "short"
    cut = shorten.cut("build Pod/x failed (exit code 1): Error: building at STEP", 30)
    assert len(cut) <= 30 and cut.endswith("...")
