"""A build's disk follows manifests/build-disk.yaml for the base in use, settings win, and
without the base's size the defaults of settings.py apply. Expected values are computed here from
the table's rows by the rules imagebuild/disk.py states (an emptyDir on the node's xfs, a volume
on the largest filesystem; `auto` sized as overlay and limited as the larger driver; the unpacked
size twice the compressed, after upstream's Fedora CoreOS figures), never copied from its output."""

from __future__ import annotations

import math

import pytest

from reconcile.core.storage import disk
from reconcile.imagebuild import settings, templates
from tests.support import factory as F

GIB = 1 << 30
ROWS = templates.table("build-disk.yaml")["filesystems"]


def read(**keys: str) -> settings.Settings:
    return settings.read(F.NS, {"on-cluster-build-config": F.build_config(**keys),
                                "machine-config-osimageurl": F.osimageurl()})


def peak(fs: str, driver: str, mode: str) -> float:
    return ROWS[fs]["factors"][driver][mode]["peak"]


def gib(size: float) -> int:
    return max(1, math.ceil(size / GIB))


@pytest.mark.parametrize("size", [3 * GIB // 7, int(1.3e9), 5 * GIB])
def test_an_emptydir_build_is_sized_by_the_xfs_row_of_its_driver(size):
    unpacked = 2 * size
    got = disk.plan(read(), disk.BaseSize("quay.io/b@sha256:" + "a" * 64, size), "emptyDir", "vfs")
    request = gib(peak("xfs", "vfs", "today") * unpacked)
    assert (got.request, got.limit, got.volume) == (f"{request}Gi", f"{request * 2}Gi", "") and got.known
    assert f"{size} bytes compressed" in got.figures and "vfs on the node's xfs" in got.figures


def test_auto_is_sized_as_overlay_and_limited_as_the_larger_driver():
    size = 4 * GIB
    got = disk.plan(read(), disk.BaseSize("b", size), "emptyDir", "auto")
    request = gib(peak("xfs", "overlay", "today") * 2 * size)
    worst = gib(max(peak("xfs", d, "today") for d in ("overlay", "vfs")) * 2 * size)
    assert (got.request, got.limit) == (f"{request}Gi", f"{max(request, worst) * 2}Gi")


@pytest.mark.parametrize("driver", ["vfs", "auto"])
def test_a_volume_is_sized_by_the_largest_filesystem_and_room_for_the_next_base(driver):
    size = 2 * GIB
    got = disk.plan(read(), disk.BaseSize("b", size), "persistent", driver)
    sized = "vfs" if driver == "vfs" else "overlay"
    volume = gib(max(peak(fs, sized, "kept") for fs in ROWS) * 2 * size * 2)
    defaults = {k: d for k, (_, _, d) in settings.BUILD_RESOURCES.items()}
    assert got.volume == f"{volume}Gi" and got.known
    assert (got.request, got.limit) == (defaults["buildEphemeralStorageRequest"],
                                        defaults["buildEphemeralStorageLimit"])


def test_without_the_bases_size_the_defaults_apply_saying_why():
    got = disk.plan(read(), disk.BaseSize("b", why="the registry answered 401"), "persistent", "vfs")
    defaults = {k: d for k, (_, _, d) in settings.BUILD_RESOURCES.items()}
    assert (got.request, got.limit) == (defaults["buildEphemeralStorageRequest"],
                                        defaults["buildEphemeralStorageLimit"])
    assert not got.known and "the defaults (the base image's size is unknown: the registry answered 401)" in got.figures


def test_settings_win_and_a_derived_limit_is_never_below_a_set_request():
    base = disk.BaseSize("b", 2 * GIB)
    request = gib(peak("xfs", "vfs", "today") * 4 * GIB)
    got = disk.plan(read(buildEphemeralStorageRequest="500Gi"), base, "emptyDir", "vfs")
    assert (got.request, got.limit) == ("500Gi", "500Gi") and "buildEphemeralStorageRequest set" in got.figures
    got = disk.plan(read(buildEphemeralStorageLimit="1Gi"), base, "emptyDir", "vfs")
    assert (got.request, got.limit) == ("1Gi", "1Gi")
    got = disk.plan(read(buildEphemeralStorageLimit="200Gi"), base, "emptyDir", "vfs")
    assert (got.request, got.limit) == (f"{request}Gi", "200Gi")
    got = disk.plan(read(buildStorageSize="300Gi"), base, "persistent", "vfs")
    assert got.volume == "300Gi" and got.known and "buildStorageSize set" in got.figures


def test_the_table_has_the_node_filesystem_the_emptydir_sizing_reads():
    """RHCOS's root filesystem (disk.py NODE_FILESYSTEM); the rows' shape: test_build_disk_table.py."""
    assert disk.NODE_FILESYSTEM == "xfs" and "xfs" in ROWS


@pytest.mark.parametrize("storage", ["emptyDir", "persistent"])
def test_contract_md_quotes_what_the_plan_says_for_its_example_base(storage):
    """docs/contract.md ("A build's disk") quotes `ocl-reconciler.io/disk` for a 1395864371-byte
    base: the quote is what the plan gives with today's factors (manifests/build-disk.yaml)."""
    found = settings.read(F.NS, {"on-cluster-build-config": F.build_config(),
                                 "machine-config-osimageurl": F.osimageurl()})
    figures = disk.plan(found, disk.BaseSize("base", 1395864371), storage, "auto").figures
    text = " ".join((F.ROOT / "docs" / "contract.md").read_text().split())
    assert f"`{figures}`" in text, figures
