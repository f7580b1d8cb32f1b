"""What a user installs: the wheel, installed non-editable outside the work tree (issue 49).

The wheel once shipped 9 of 12 packages (a hand-kept list in pyproject.toml), so `diff`, `run` and
`status` crashed with ModuleNotFoundError while every test, run through the editable install, passed.
Here every module and template of the tree must be in the installed package, byte for byte, and
the verbs a user runs must run from there, in a folder outside the tree, with the exit codes that
`ocl-reconcile COMMAND --help` documents and the same output as the work tree's own CLI.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support import factory as F
from tests.support import installed as I

SNAPSHOT = F.ROOT / "examples/cluster.yaml"
#: both CLIs read one pinned clock (cli._now), so their timestamps and ages agree
NOW = "2026-12-06T12:00:00Z"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("wheel")
    return I.build_wheel(I.copy_checkout(where / "src"), where / "dist")


@pytest.fixture(scope="module")
def product(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> I.Installed:
    return I.install(wheel, tmp_path_factory.mktemp("installed") / "venv")


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder outside the tree holding only a copy of the bundled snapshot."""
    where = tmp_path_factory.mktemp("user")
    shutil.copy(SNAPSHOT, where / "cluster.yaml")
    return where


def _digests(root: Path, pattern: str) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob(pattern)) if p.is_file() and "__pycache__" not in p.parts}


def test_every_module_of_the_tree_is_installed_unchanged(product: I.Installed) -> None:
    tree = _digests(F.ROOT / "reconcile", "*.py")
    installed = _digests(product.site / "reconcile", "*.py")
    assert len(tree) > 90                            # the tree itself was read
    missing = sorted(set(tree) - set(installed))
    assert not missing, f"{len(missing)} modules of the tree are not installed: {missing}"
    assert sorted(set(installed) - set(tree)) == []
    assert [m for m in tree if tree[m] != installed[m]] == []


def test_every_template_and_data_table_is_installed_inside_the_package(product: I.Installed) -> None:
    tree = _digests(F.ROOT / "manifests", "*")
    installed = _digests(product.site / "reconcile/manifests", "*")
    assert tree and installed == tree


def test_the_installed_package_runs_from_the_venv_and_finds_its_own_templates(
        product: I.Installed, outside: Path) -> None:
    probe = ("import reconcile, reconcile.imagebuild.templates as t; "
             "print(reconcile.__file__); print(t.MANIFESTS)")
    result = product.run(product.python, "-c", probe, cwd=outside)
    assert result.returncode == 0, result.stderr
    module, manifests = (Path(line) for line in result.stdout.split())
    assert module == product.site / "reconcile/__init__.py"
    assert manifests == product.site / "reconcile/manifests"


def test_every_installed_module_imports(product: I.Installed, outside: Path) -> None:
    """Each module, imported by itself from the installed package: a missing module, template or
    runtime dependency fails here by name rather than in the verb that happens to reach it
    (`reconcile.__main__` aside: importing it runs the CLI)."""
    walk = ("import importlib, pkgutil, reconcile\n"
            "names = [m.name for m in pkgutil.walk_packages(reconcile.__path__, 'reconcile.')\n"
            "         if m.name != 'reconcile.__main__']\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names))")
    result = product.run(product.python, "-c", walk, cwd=outside)
    assert result.returncode == 0, result.stderr
    tree = [p for p in (F.ROOT / "reconcile").rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    packages = [p for p in (F.ROOT / "reconcile").rglob("__init__.py") if p.parent.name != "reconcile"]
    assert int(result.stdout) == len(tree) + len(packages)


def test_the_locked_dependencies_satisfy_the_wheel(product: I.Installed) -> None:
    """The image installs requirements.lock with --no-deps: pip check says whether that is enough."""
    result = I.pip_check(product)
    assert result.returncode == 0, result.stdout + result.stderr


def _work_tree(*args: str) -> subprocess.CompletedProcess[str]:
    """The same verb through the work tree's editable install (the reference the tests trust)."""
    return subprocess.run([sys.executable, "-m", "reconcile", *args], capture_output=True, text=True,
                          cwd=F.ROOT, timeout=120, env=dict(os.environ, OCL_RECONCILE_NOW=NOW))


#: each verb on the bundled snapshot, and its exit code as its --help documents it
VERBS = {
    "diff": (("diff", "--snapshot", "{snap}"), 1),                  # 1: the plan would change something
    "run": (("run", "--snapshot", "{snap}", "--write-snapshot", "{out}"), 0),
    "status": (("status", "--snapshot", "{snap}"), 0),
    "status-wide": (("status", "-o", "wide", "--snapshot", "{snap}"), 0),
    "explain": (("explain", "worker", "--snapshot", "{snap}"), 0),
    "render": (("render", "--snapshot", "{snap}"), 0),
}


@pytest.mark.parametrize("verb", VERBS)
def test_a_verb_runs_from_the_installed_package_outside_the_tree(
        product: I.Installed, outside: Path, verb: str) -> None:
    args, code = VERBS[verb]
    ours = [a.format(snap="cluster.yaml", out=f"after-{verb}.yaml") for a in args]
    result = product.run(product.bin("ocl-reconcile"), *ours, cwd=outside, now=NOW)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    tree_out = outside / f"tree-after-{verb}.yaml"
    reference = _work_tree(*[a.format(snap=str(outside / "cluster.yaml"), out=str(tree_out)) for a in args])
    assert reference.returncode == code, reference.stderr
    assert result.stdout == reference.stdout.replace(str(outside / "cluster.yaml"), "cluster.yaml")
    if verb == "run":
        after = list(yaml.safe_load_all((outside / "after-run.yaml").read_text()))
        assert after == list(yaml.safe_load_all(tree_out.read_text()))
        assert any(d["kind"] == "Pod" for doc in after for d in doc.get("items", [doc]))



# the image: docs/admin.md builds it with `podman build -f Containerfile .` -------------------------
CONTAINERFILE = F.ROOT / "Containerfile"


def _instructions() -> list[tuple[str, list[str]]]:
    """(INSTRUCTION, its words) of the Containerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(words[0].upper(), words[1:]) for words in lines]


def test_the_images_build_context_builds_the_same_wheel(wheel: Path, tmp_path: Path) -> None:
    """Only what the Containerfile COPYs reaches `pip install .` in the image: a file the build
    needs and no COPY names (setup.py, say) would fail the image's build or thin its wheel."""
    for instruction, words in _instructions():
        if instruction != "COPY":
            continue
        *sources, dest = [w for w in words if not w.startswith("--")]
        for source in sources:
            origin = F.ROOT / source
            named = tmp_path / "ctx" / dest / origin.name if dest.endswith("/") else tmp_path / "ctx" / dest
            if origin.is_dir():
                shutil.copytree(origin, named, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                named.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, named)
    from_context = I.build_wheel(tmp_path / "ctx", tmp_path / "dist")
    with zipfile.ZipFile(wheel) as full, zipfile.ZipFile(from_context) as image:
        assert sorted(image.namelist()) == sorted(full.namelist())
        assert len([n for n in full.namelist() if n.startswith("reconcile/")]) > 100


def test_the_base_image_is_a_build_argument_pinned_by_digest() -> None:
    steps = _instructions()
    froms = [i for i, (instruction, _) in enumerate(steps) if instruction == "FROM"]
    assert len(froms) == 1
    base = steps[froms[0]][1][0]
    name = re.fullmatch(r"\$\{?(\w+)\}?", base)
    assert name, f"FROM {base}: the base must be a build argument an administrator can point at a mirror"
    args = dict(w[0].split("=", 1) for instruction, w in steps[:froms[0]] if instruction == "ARG" and "=" in w[0])
    default = args[name.group(1)]
    # a digest reference: repository@sha256:<64 hex> (distribution/reference's grammar), never a tag alone
    assert re.fullmatch(r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}", default), default
