"""The `run done:` line counts the writes the run made, a pool that ends in Error included (issue 29
item 4: it said `0 created, 0 patched, 0 deleted` while the audit log showed 5 created, 1 patched, 5
deleted, after a failed image prune and after a Pod create refused with 403). The expected counts are
the stand-in API server's own request log, never our plan."""

from __future__ import annotations

import re

import pytest

from reconcile import cli
from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault

pytestmark = pytest.mark.usefixtures("builder")


def summary(err: str) -> tuple[int, int, int]:
    line = next(x for x in err.splitlines() if "run done:" in x)
    created, patched, deleted = (int(n) for n in re.search(r"(\d+) created, (\d+) patched, (\d+) deleted", line).groups())
    return created, patched, deleted


def served(server: APIServer) -> tuple[int, int, int]:
    """Writes the server answered with success, Events and the Lease aside."""
    ok = [r for r in server.writes() if r.resource not in ("events", "leases") and r.status < 400]
    return tuple(sum(1 for r in ok if r.verb == verb) for verb in ("create", "patch", "delete"))


def test_a_refused_build_object_create_is_counted_with_the_writes_before_it(tmp_path, capsys, monkeypatch, builder):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    build_resource = {"Pod": "pods", "Build": "builds"}[builder]
    with APIServer(F.cluster(F.pool("worker")), clock=lambda: F.NOW) as server:
        server.faults.append(Fault("status", code=403, times=0,
                                   match=lambda verb, res, ns, name: verb == "create" and res == build_resource))
        capsys.readouterr()
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--timeout", "20"])
        err = capsys.readouterr().err
        assert code == 2 and "run done: pools 1 Error" in err, err
        assert served(server)[0] >= 2                     # the ConfigMaps before the refused create
        assert summary(err) == served(server), err
