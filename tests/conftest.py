from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from reconcile import cli, snapshot
from tests import factory

sys.path.insert(0, str(factory.ROOT / "examples"))


class Cli:
    """Runs `ocl-reconcile` in-process on snapshots in a temporary folder."""

    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str]):
        self.tmp, self.capsys, self.count = tmp, capsys, 0

    def write(self, items: list[dict[str, Any]]) -> Path:
        self.count += 1
        path = self.tmp / f"snap-{self.count}.yaml"
        snapshot.write(str(path), items)
        return path

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def run(self, items: list[dict[str, Any]], *extra: str) -> tuple[int, list[dict[str, Any]], str]:
        """`run --snapshot IN --write-snapshot OUT`; returns (exit code, OUT's objects, stderr)."""
        src = self.write(items)
        out = self.tmp / f"out-{self.count}.yaml"
        code, _, err = self("run", "--snapshot", str(src), "--write-snapshot", str(out), *extra)
        return code, (snapshot.load(str(out)) if out.exists() else []), err


@pytest.fixture
def run_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    return Cli(tmp_path, capsys)
