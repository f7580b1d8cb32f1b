"""Metrics of a run, as Prometheus reads them: the textfile and the Pushgateway push, parsed with
prometheus_client's own parser, on snapshots and on the test API server."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubelet
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import factory as F
from tests.support.apiserver import APIServer, Fault


def samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_textfile_metrics_of_a_lifecycle(run_cli, tmp_path):
    metrics = tmp_path / "ocl.prom"
    items = F.cluster(F.pool("worker"), F.pool("infra", rendered="rendered-missing"))
    items = [o for o in items if o["metadata"]["name"] != "rendered-missing"]
    code, after, _ = run_cli.run(items, "--metrics-file", str(metrics))
    assert code == 2
    got = samples(metrics.read_text())
    assert got[("ocl_builds", (("pool", "worker"), ("state", "Pending")))] == 1
    assert got[("ocl_builds", (("pool", "worker"), ("state", "Succeeded")))] == 0
    assert got[("ocl_builds", (("pool", "infra"), ("state", "Blocked")))] == 1
    assert got[("ocl_errors_total", (("reason", "blocked"),))] == 1
    assert got[("ocl_reconcile_duration_seconds", ())] > 0
    assert got[("ocl_api_requests_total", (("outcome", "ok"), ("verb", "create")))] >= 3
    for obj in after:
        if obj["kind"] == "Pod":
            kubelet.set_phase(obj, "Succeeded")
    code, _, _ = run_cli.run(after, "--metrics-file", str(metrics))
    got = samples(metrics.read_text())
    assert got[("ocl_builds", (("pool", "worker"), ("state", "Succeeded")))] == 1
    assert ("ocl_build_duration_seconds", (("pool", "worker"),)) in got


def test_api_request_outcomes_and_errors_on_the_live_path(tmp_path, monkeypatch):
    monkeypatch.setenv("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    monkeypatch.setattr("reconcile.cluster.live.time.sleep", lambda s: None)
    from reconcile import cli
    metrics = tmp_path / "ocl.prom"
    with APIServer(F.cluster()) as server:
        server.faults.append(Fault("status", code=503, match=lambda v, r, ns, n: r == "pods" and v == "list"))
        code = cli.main(["run", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--metrics-file", str(metrics)])
    assert code == 0
    got = samples(metrics.read_text())
    assert got[("ocl_api_requests_total", (("outcome", "503"), ("verb", "get")))] == 1
    assert got[("ocl_api_requests_total", (("outcome", "201"), ("verb", "post")))] >= 4


class _Gateway(BaseHTTPRequestHandler):
    received: list = []

    def log_message(self, *a):
        pass

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        type(self).received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT


@pytest.fixture
def gateway():
    _Gateway.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Gateway.received
    server.shutdown()
    server.server_close()


def test_pushgateway_receives_the_metrics(run_cli, gateway):
    url, received = gateway
    code, _, err = run_cli.run(F.cluster(), "--pushgateway", url)
    assert code == 0
    ((path, body),) = received
    assert path == "/metrics/job/ocl-reconciler"
    assert samples(body)[("ocl_builds", (("pool", "worker"), ("state", "Pending")))] == 1


def test_metrics_failures_warn_but_do_not_fail_the_run(run_cli, tmp_path):
    code, _, err = run_cli.run(F.cluster(), "--metrics-file", str(tmp_path / "missing-dir" / "x.prom"),
                               "--pushgateway", "http://127.0.0.1:9")
    assert code == 0
    assert "cannot write metrics to" in err and "cannot push metrics to http://127.0.0.1:9" in err
