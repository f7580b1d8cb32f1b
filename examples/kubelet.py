#!/usr/bin/env python3
"""Plays the kubelet (and OpenShift's build controller) on a snapshot: moves build Pods and Builds
to a phase and writes the status they would (for a Pod, the termination message = the digest on
success, the last log lines on failure; for a Build, status.output.to.imageDigest or logSnippet).

    python3 examples/kubelet.py IN.yaml OUT.yaml --pool worker=Succeeded --pool infra=Failed

Phases: Pending, Running, Succeeded, Failed, Evicted. The digest is derived from the Pod's name, so runs
are reproducible. Used by `make demo` and by the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, after an installed package

from reconcile.cluster import snapshot
from reconcile.contract import naming, objects  # noqa: E402

FAILURE_LOG = ("STEP 4/9: RUN jq '.spec.config' /etc/machine-config-daemon/currentconfig ...\n"
               "error: ignition-apply: unsupported config version\n"
               "Error: building at STEP \"RUN jq ...\": exit status 1\n")


def digest_for(pod_name: str) -> str:
    return "sha256:" + hashlib.sha256(pod_name.encode()).hexdigest()


BUILD_PHASES = {"Pending": "New", "Running": "Running", "Succeeded": "Complete", "Failed": "Failed"}


def set_build_phase(build: dict, phase: str, digest: str | None = None, log: str = FAILURE_LOG) -> dict:
    """Give `build` the status OpenShift's build controller reports for the Pod-style `phase`."""
    status: dict = {"phase": BUILD_PHASES.get(phase, phase)}
    if phase == "Evicted":
        status = {"phase": "Failed", "reason": "BuildPodEvicted",
                  "message": "The build pod was evicted from the node."}
    elif phase == "Succeeded":
        status["output"] = {"to": {"imageDigest": digest if digest is not None
                                   else digest_for(objects.name(build))}}
    elif phase == "Failed":
        status.update(reason="DockerBuildFailed", message="Docker build strategy has failed.",
                      logSnippet=log)
    build["status"] = status
    return build


def set_phase(obj: dict, phase: str, digest: str | None = None, log: str = FAILURE_LOG) -> dict:
    """Give a build Pod (or Build) the status reported for `phase` (in place; returned)."""
    if obj.get("kind") == "Build":
        return set_build_phase(obj, phase, digest, log)
    pod = obj
    if phase == "Evicted":
        pod["status"] = {"phase": "Failed", "reason": "Evicted",
                         "message": "The node was low on resource: memory."}
        return pod
    container = pod["spec"]["containers"][0]["name"]
    status: dict = {"phase": phase}
    if phase == "Running":
        status["containerStatuses"] = [{"name": container, "ready": True, "restartCount": 0,
                                        "state": {"running": {"startedAt": "2026-11-29T12:01:00Z"}}}]
    elif phase in ("Succeeded", "Failed"):
        ok = phase == "Succeeded"
        term = {"exitCode": 0 if ok else 1, "reason": "Completed" if ok else "Error",
                "message": (digest if digest is not None else digest_for(objects.name(pod))) if ok else log,
                "startedAt": "2026-11-29T12:01:00Z", "finishedAt": "2026-11-29T12:09:00Z"}
        status["containerStatuses"] = [{"name": container, "ready": False, "restartCount": 0,
                                        "state": {"terminated": term}}]
    pod["status"] = status
    return pod


def apply(items: list[dict], phases: dict[str, str]) -> int:
    """Set the phase of each named pool's build Pods; returns how many Pods changed."""
    changed = 0
    for obj in items:
        pool = objects.labels(obj).get(naming.POOL_LABEL)
        if obj.get("kind") in ("Pod", "Build") and pool in phases:
            set_phase(obj, phases[pool])
            changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--pool", action="append", default=[], metavar="POOL=PHASE", required=True)
    args = parser.parse_args(argv)
    phases = dict(p.split("=", 1) for p in args.pool)
    items = snapshot.load(args.input)
    changed = apply(items, phases)
    snapshot.write(args.output, items)
    print(f"kubelet: {changed} build Pod(s) moved: "
          + ", ".join(f"{k} -> {v}" for k, v in sorted(phases.items())), file=sys.stderr)
    return 0 if changed else 1


if __name__ == "__main__":
    sys.exit(main())
