"""The alerts of kustomize/overlays/openshift/prometheusrule.yaml, run by Prometheus's own promtool
(Debian's `prometheus` package, which .ci/run installs): `promtool check rules` on the rule groups,
and `promtool test rules` with series under which each alert fires, and under which it does not."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from tests.support import factory as F

RULE = F.ROOT / "kustomize/overlays/openshift/prometheusrule.yaml"
REQUIRE = "OCL_PROMTOOL"


@pytest.fixture
def promtool():
    found = shutil.which("promtool")
    if found is None:
        why = f"promtool is not on the PATH: apt-get install prometheus (.ci/run does), or set {REQUIRE}=require"
        pytest.fail(why) if os.environ.get(REQUIRE) == "require" else pytest.skip(why)
    return found


@pytest.fixture
def rules(tmp_path):
    doc = yaml.safe_load(RULE.read_text())
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    return path


def test_promtool_accepts_the_rules(promtool, rules):
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "9 rules found" in out.stdout


# Each alert: series under which it fires (after `at`) and under which it stays silent.
TESTS = [
    {"interval": "1m",
     "input_series": [{"series": 'ocl_builds{pool="worker",state="Failed"}', "values": "1x20"},
                      {"series": 'ocl_builds{pool="infra",state="Failed"}', "values": "0x20"},
                      {"series": 'ocl_builds{pool="infra",state="Succeeded"}', "values": "1x20"}],
     "alert_rule_test": [
         {"eval_time": "5m", "alertname": "OclPoolNeedsAttention", "exp_alerts": []},      # not for 10m yet
         {"eval_time": "15m", "alertname": "OclPoolNeedsAttention",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "worker", "state": "Failed"},
                          "exp_annotations": {
                              "summary": "MachineConfigPool worker is Failed",
                              "description": "ocl-reconcile status, or oc get mcp/worker -o jsonpath="
                                             "'{.metadata.annotations.ocl-reconciler\\.io/message}'"}}]}]},
    {"interval": "1m",
     "input_series": [{"series": 'ocl_architecture_builds{pool="worker",architecture="arm64",state="Failed"}',
                       "values": "1x20"},
                      {"series": 'ocl_architecture_builds{pool="worker",architecture="amd64",state="Failed"}',
                       "values": "0x20"}],
     "alert_rule_test": [
         {"eval_time": "5m", "alertname": "OclArchitectureBuildFailed", "exp_alerts": []},
         {"eval_time": "15m", "alertname": "OclArchitectureBuildFailed",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "worker", "architecture": "arm64"},
                          "exp_annotations": {"summary": "the arm64 build of MachineConfigPool worker failed",
                                              "description": "ocl-reconcile explain worker"}}]}]},
    {"interval": "1m",
     # pushed at t=0 (timestamp 0) and not again: 15 minutes later it fires; pushed every 5 minutes: never
     "input_series": [{"series": 'ocl_last_run_timestamp_seconds{job="ocl-reconciler"}', "values": "0x30"}],
     "alert_rule_test": [
         {"eval_time": "10m", "alertname": "OclReconcilerNotRunning", "exp_alerts": []},
         {"eval_time": "16m", "alertname": "OclReconcilerNotRunning",
          "exp_alerts": [{"exp_labels": {"severity": "warning"},
                          "exp_annotations": {"summary": "ocl-reconciler has not run for more than 15 minutes"}}]},
         {"eval_time": "16m", "alertname": "OclReconcilerAbsent", "exp_alerts": []}]},
    {"interval": "1m",
     "input_series": [{"series": 'ocl_last_run_timestamp_seconds{job="ocl-reconciler"}',
                       "values": "0 60 120 180 240 300 360 420 480 540 600 660 720 780 840 900 960 1020 1080 1140"}],
     "alert_rule_test": [{"eval_time": "19m", "alertname": "OclReconcilerNotRunning", "exp_alerts": []}]},
    {"interval": "1m",
     # waiting runs (`run --wait 540` under the */5 CronJob, concurrencyPolicy Forbid: runs start at 0, 15 and
     # 30 minutes): each pushes after its first pass and every minute while it waits (reconcile/cluster/
     # follow.py REPORT_EVERY), and ends by 11 minutes; no alert while they run. The third hangs after its
     # first push: it fires 15 minutes after that push, as for a run that never came
     "input_series": [{"series": 'ocl_last_run_timestamp_seconds{job="ocl-reconciler"}', "values": " ".join(
         [str(60 * m) for m in range(12)] + ["660"] * 3 + [str(60 * m) for m in range(15, 27)] + ["1560"] * 3
         + ["1800"] * 20)}],
     "alert_rule_test": [
         {"eval_time": "14m", "alertname": "OclReconcilerNotRunning", "exp_alerts": []},
         {"eval_time": "29m", "alertname": "OclReconcilerNotRunning", "exp_alerts": []},
         {"eval_time": "44m", "alertname": "OclReconcilerNotRunning", "exp_alerts": []},
         {"eval_time": "46m", "alertname": "OclReconcilerNotRunning",
          "exp_alerts": [{"exp_labels": {"severity": "warning"},
                          "exp_annotations": {"summary": "ocl-reconciler has not run for more than 15 minutes"}}]}]},
    {"interval": "1m",
     "input_series": [{"series": 'ocl_other_metric', "values": "1x40"}],
     "alert_rule_test": [
         {"eval_time": "20m", "alertname": "OclReconcilerAbsent", "exp_alerts": []},
         {"eval_time": "31m", "alertname": "OclReconcilerAbsent",
          "exp_alerts": [{"exp_labels": {"severity": "warning"},
                          "exp_annotations": {"summary": "no ocl-reconciler metrics for 30 minutes"}}]}]},
    {"interval": "5m",
     # a counter pushed by each run (its registry is new each time: each push is that run's count)
     "input_series": [{"series": 'ocl_errors_total{reason="build-failed",job="ocl-reconciler"}', "values": "0 0 1 1 1"},
                      {"series": 'ocl_errors_total{reason="event",job="ocl-reconciler"}', "values": "0x4"}],
     "alert_rule_test": [
         {"eval_time": "5m", "alertname": "OclReconcilerErrors", "exp_alerts": []},
         {"eval_time": "20m", "alertname": "OclReconcilerErrors",
          "exp_alerts": [{"exp_labels": {"severity": "info", "reason": "build-failed"},
                          "exp_annotations": {"summary": "ocl-reconciler errors (build-failed) in the last hour"}}]}]},
    {"interval": "1m",
     "input_series": [{"series": 'kube_job_status_failed{namespace="ocl-reconciler",job_name="ocl-reconciler-29400000"}',
                       "values": "0 0 1 1"},
                      {"series": 'kube_job_status_failed{namespace="other",job_name="ocl-reconciler-1"}', "values": "1x3"}],
     "alert_rule_test": [
         {"eval_time": "1m", "alertname": "OclReconcilerJobFailed", "exp_alerts": []},
         {"eval_time": "3m", "alertname": "OclReconcilerJobFailed",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "ocl-reconciler",
                                         "job_name": "ocl-reconciler-29400000"},
                          "exp_annotations": {"summary": "Job ocl-reconciler-29400000 of the ocl-reconciler "
                                                         "CronJob failed"}}]}]},
    {"interval": "5m",
     # worker overridden by zz-os from t=0; infra's override was fixed after 10 minutes
     "input_series": [{"series": 'ocl_rollout_overridden{pool="worker",machineconfig="zz-os",job="ocl-reconciler"}',
                       "values": "1x8"},
                      {"series": 'ocl_rollout_overridden{pool="infra",machineconfig="zz-infra",job="ocl-reconciler"}',
                       "values": "1 1 1"}],
     "alert_rule_test": [
         {"eval_time": "10m", "alertname": "OclRolloutOverridden", "exp_alerts": []},      # not for 15m yet
         {"eval_time": "20m", "alertname": "OclRolloutOverridden",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "worker", "machineconfig": "zz-os"},
                          "exp_annotations": {
                              "summary": "MachineConfig zz-os overrides the image of pool worker",
                              "description": "rename zz-os to sort before ocl-osimageurl-worker, or remove its "
                                             "osImageURL"}}]}]},
    {"interval": "5m",
     # worker: one machine degraded for 40 minutes; infra: degraded for 10 minutes, then fixed
     "input_series": [{"series": 'ocl_rollout_nodes{pool="worker",state="degraded",job="ocl-reconciler"}',
                       "values": "1x10"},
                      {"series": 'ocl_rollout_nodes{pool="worker",state="updated",job="ocl-reconciler"}',
                       "values": "2x10"},
                      {"series": 'ocl_rollout_nodes{pool="infra",state="degraded",job="ocl-reconciler"}',
                       "values": "1 1 1 0 0 0 0 0 0 0 0"}],
     "alert_rule_test": [
         {"eval_time": "25m", "alertname": "OclRolloutDegraded", "exp_alerts": []},
         {"eval_time": "35m", "alertname": "OclRolloutDegraded",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "worker"},
                          "exp_annotations": {
                              "summary": "the rollout of our image to pool worker is stuck with 1 degraded machine(s)",
                              "description": "oc describe mcp/worker; oc get nodes -l "
                                             "node-role.kubernetes.io/worker"}}]}]},
    {"interval": "5m",
     # the gate released worker (its build failed) at t=10m; infra stays held
     "input_series": [{"series": 'ocl_rollout_hold_released{pool="worker",job="ocl-reconciler"}',
                       "values": "0 0 1 1 1"},
                      {"series": 'ocl_rollout_hold_released{pool="infra",job="ocl-reconciler"}',
                       "values": "0x4"}],
     "alert_rule_test": [
         {"eval_time": "5m", "alertname": "OclRolloutHoldReleased", "exp_alerts": []},
         {"eval_time": "15m", "alertname": "OclRolloutHoldReleased",
          "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "worker"},
                          "exp_annotations": {
                              "summary": "the rollout gate released pool worker: its new files roll out on the "
                                         "last good image",
                              "description": "ocl-reconcile explain worker; oc get mcp/worker -o jsonpath="
                                             "'{.metadata.annotations.ocl-reconciler\\.io/gate-reason}'"}}]}]},
]


def promtool_test_rules(promtool, rules, tmp_path, tests):
    """`promtool test rules` on these unit tests of the rule file."""
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}))
    return subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=120)


def test_each_alert_fires_when_it_should_and_only_then(promtool, rules, tmp_path):
    out = promtool_test_rules(promtool, rules, tmp_path, TESTS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_a_wrong_expectation_fails_so_the_test_can_fail(promtool, rules, tmp_path):
    wrong = [dict(TESTS[0], alert_rule_test=[{"eval_time": "5m", "alertname": "OclPoolNeedsAttention",
                                              "exp_alerts": [{"exp_labels": {"pool": "worker"}}]}])]
    assert promtool_test_rules(promtool, rules, tmp_path, wrong).returncode != 0
