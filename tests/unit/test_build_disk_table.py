"""manifests/build-disk.yaml, the measured disk factors of a build's storage (bench/build_cost.py):
the shape the reconciler reads, and figures that a storage holding the image can have."""

from __future__ import annotations

import datetime
from pathlib import Path

import yaml

TABLE = Path(__file__).resolve().parents[2] / "manifests/build-disk.yaml"


def test_each_filesystem_has_both_drivers_and_modes_measured_on_a_base_as_the_issue_asks():
    table = yaml.safe_load(TABLE.read_text())
    assert set(table) == {"filesystems"} and table["filesystems"]
    for fs, entry in table["filesystems"].items():
        measured = entry["measured"]
        datetime.date.fromisoformat(measured["date"])
        assert measured["command"].startswith("python bench/build_cost.py ") and f"--fs {fs}" in measured["command"]
        # issue 32: about 50 layers, at least 400 MB
        assert measured["base"]["layers"] >= 45 and measured["base"]["unpacked_mb"] >= 400, fs
        assert set(entry["factors"]) == {"vfs", "overlay"}, fs
        for driver, modes in entry["factors"].items():
            assert set(modes) == {"today", "kept"}, (fs, driver)
            # a storage holds the unpacked image at least once while it builds
            assert min(m["peak"] for m in modes.values()) >= 1.0, (fs, driver)
            assert modes["today"]["kept"] == 0, (fs, driver)          # an emptyDir keeps nothing
            if driver == "vfs" and not measured["reflink"]:           # build-pod.sh keeps none there
                assert modes["kept"]["kept"] == 0, (fs, driver)
            else:
                assert 1.0 <= modes["kept"]["kept"] <= modes["kept"]["peak"], (fs, driver)
