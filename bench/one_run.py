"""A change reaches its nodes in one run (issue 40), measured on the real kube-apiserver (`make realapi`):
runs of `ocl-reconcile run` (as its ServiceAccount, with the rollout Component, `rolloutGate: hold`)
from a change to the first node's new desiredConfig, with `--wait` and without it (today), and the
seconds from the build's end to that moment; for a MachineConfig change, a cluster upgrade, and a
custom pool (infra, not opted in) that inherits worker's image; and the requests of a steady run.

What plays what, printed with the figures:
- the build: a kubelet played here ends each build Pod `--build-seconds` after it appears (Succeeded);
- the MCO's render and node controllers: the real ones (`ocl-mco-harness`, `make mco`; their render
  delay as built, update delay 200 ms) where that is built, else the imitations of
  tests/support/mcorender.py and mconode.py run in a loop with upstream's delays (render 5 s after a
  MachineConfig changes: `renderDelay`; a pool synced every 0.2 s); either way the daemon is played
  (a node moves to its desiredConfig at once);
- without `--wait`, the CronJob's period is not slept: between two runs the cluster settles (every
  build ends, the MCO renders), as it does in the 5 minutes between two runs; today's seconds are
  then the CronJob's periods the change waits for, given as such.

    python3 bench/one_run.py [--build-seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from tests.support import (
    playing,  # noqa: E402
    realserver,  # noqa: E402
)
from tests.support.playing import WAIT, Scenario, mcorender_delay  # noqa: E402

PERIOD = 300                                    # the CronJob's */5


def today_seconds(runs: int) -> str:
    """Without waiting, the build ends during the first run's period; each later run comes one CronJob
    period after the one before: the first node moves 0 to 1 period after the second run."""
    low, high = max(0, runs - 2) * PERIOD, max(0, runs - 1) * PERIOD
    return f"{low} to {high} (CronJob periods) + the controllers'"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-seconds", type=float, default=3.0)
    args = parser.parse_args()
    try:
        realserver.binaries()
    except BaseException as err:  # noqa: BLE001 - pytest's skip when they are not built
        sys.exit(f"the real kube-apiserver is not built ({err}): run `make realapi` first")
    root = Path(tempfile.mkdtemp(prefix="ocl-one-run-"))
    api = realserver.start_installed(root)
    real_mco, controllers = None, None
    try:
        api.install_rollout(playing.REPO, ("worker",))
        try:
            from tests.support import mcoreal
            installed = mcoreal.Installed(api, mcoreal.harness())
            controllers = mcoreal.Controllers(installed, root).start()
            real_mco = mcoreal.Cluster(controllers, mcoreal.Daemon(installed, root))
            create = type(api).create
            type(api).create = lambda a, obj: create(a, mcoreal.as_created(obj))
            who = "the MCO's real render and node controllers (ocl-mco-harness), the daemon played"
        except BaseException as err:  # noqa: BLE001 - not built: played
            who = (f"the MCO's controllers played (tests/support/mcorender.py, mconode.py; render delay "
                   f"{mcorender_delay():.0f} s), the daemon played; the real ones are not built "
                   f"({str(err)[:80]})")
        bench = Scenario(api, root, args.build_seconds, real_mco)
        bench.world.start()
        rows = []
        for kind, label in (("change", "a MachineConfig change"), ("upgrade", "a cluster upgrade"),
                            ("custom", "a custom pool inheriting worker's image (infra, not opted in)")):
            today, waiting = bench.measure(kind, False), bench.measure(kind, True)
            rows.append((label, today, waiting))
        plain, waiting = bench.steady_requests()
        bench.world.stop.set()
    finally:
        if controllers is not None:
            controllers.stop()
        api.stop()
    print(f"# one run (issue 40): real kube-apiserver; {who}; build {args.build_seconds:.0f} s; "
          f"run --wait {WAIT}\n")
    print("| change | runs to the first node's new desiredConfig: today / `--wait` "
          "| seconds from the build's end to that moment: today / `--wait` |")
    print("|---|---|---|")
    for label, today, waiting_ in rows:
        print(f"| {label} | {today['runs']} / {waiting_['runs']} | {today_seconds(today['runs'])} / "
              f"{waiting_['seconds']} |")
    print(f"\nrequests of a steady run: {plain} without --wait, {waiting} with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
