"""The package layout shows what is pure: every import points down a layer, and the pure layers
(contract, imagebuild, core; preflight but its reader) import nothing that does I/O. Read off
each module's imports with ast."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "reconcile"
#: lower number = lower layer; a module may import its own layer or any lower one
LAYERS = {"contract": 1, "imagebuild": 2, "core": 3, "diff": 4, "output": 5, "cluster": 6, "preflight": 7,
          "cli": 8, "__main__": 8, "__init__": 0, "__version__": 0}
PURE = ("contract", "imagebuild", "core")
#: preflight's checks are pure functions of what its reader read: only the reader talks to the cluster
PREFLIGHT_READER = "reconcile.preflight.read"
IO_MODULES = {"socket", "urllib", "http", "subprocess", "shutil", "tempfile", "requests", "urllib3",
              "kubernetes", "prometheus_client", "ssl", "threading"}


def layer_of(module: str) -> str:
    """reconcile.core.lifecycle -> core; reconcile.cli -> cli."""
    return module.split(".")[1] if module.count(".") else "__init__"


def imports() -> list[tuple[str, str]]:
    """(importing module, imported module) for every module of the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out += [(module, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out += [(module, f"{node.module}.{a.name}" if node.module == "reconcile" else node.module)
                        for a in node.names]
    return out


def test_every_import_points_down():
    ups = [(a, b) for a, b in imports() if b.startswith("reconcile.") and a.startswith("reconcile.")
           and LAYERS[layer_of(b)] > LAYERS[layer_of(a)]]
    assert ups == []


def test_the_pure_layers_import_nothing_that_does_io():
    bad = [(a, b) for a, b in imports() if layer_of(a) in PURE
           and (b.split(".")[0] in IO_MODULES
                or (b.startswith("reconcile.") and layer_of(b) not in PURE))]
    assert bad == []


def test_every_module_is_in_a_layer():
    modules = {a for a, _ in imports()} | {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
                                          for p in PACKAGE.rglob("*.py")}
    assert {layer_of(m) for m in modules if m.startswith("reconcile.")} <= set(LAYERS)


def test_preflight_reads_in_one_module():
    bad = [(a, b) for a, b in imports() if layer_of(a) == "preflight" and a != PREFLIGHT_READER
           and (b.split(".")[0] in IO_MODULES or (b.startswith("reconcile.") and layer_of(b) == "cluster"))]
    assert bad == []
