"""How long `make test` takes, and where (issue 37: under 10 minutes on 2 cores): runs the suite as
`make test` does (pytest-xdist, WORKERS workers, `--dist worksteal`) with a plugin that notes each
test's worker, wall time and the worker's own CPU seconds, and samples the machine's idle CPU from
/proc/stat. Prints the wall time, the CPU the run and its children used (kube-apiserver, etcd, the
MCO's harness, buildah... are children of the workers), how busy the CPUs were, each worker's share,
and the files that take the most wall time and CPU. Run it with nothing else on the machine.

    python3 bench/suite_time.py [--workers 3] [--top 15] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]



def cpu_times() -> tuple[float, float]:
    """(busy, idle) jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, idle


def survivors(marker: bytes) -> list[str]:
    """The command lines of processes whose environment holds `marker` (the suite's, inherited)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                found.append(command.decode(errors="replace")[:120])
        except OSError:
            continue
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3, help="pytest-xdist workers (make test's: 3)")
    parser.add_argument("--top", type=int, default=15, help="files shown (default: %(default)s)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.pathsep.join(filter(None, [str(ROOT / "bench"), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, SUITE_TIME_DIR=tmp, PYTHONPATH=path)
        xdist = ["-n", str(args.workers), "--dist", "worksteal"] if args.workers else []
        command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_time_plugin", *xdist, *args.pytest_args]
        busy0, idle0 = cpu_times()
        started, began = time.monotonic(), time.time()
        # output to a file, not a pipe: a process the suite left behind would hold a pipe open
        # and be counted in the wall time (make test waits for pytest only); it is named below
        with open(Path(tmp) / "out.txt", "w+") as out:
            done = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
            wall = time.monotonic() - started
            out.seek(0)
            output = out.read()
        busy1, idle1 = cpu_times()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = [json.loads(line) for f in Path(tmp).glob("*.jsonl") for line in f.read_text().splitlines()]
        moments = Path(tmp) / "moments"
        marks = [json.loads(line) for line in moments.read_text().splitlines()] if moments.exists() else []
        left = survivors(f"SUITE_TIME_DIR={tmp}".encode())
    if marks:       # where the wall time outside the tests goes
        said = [f"{m['w']} {m['what']} {m['at'] - began:.1f}" for m in sorted(marks, key=lambda m: m["at"])]
        print(f"moments (s after start): {', '.join(said)}, exit {wall:.1f}")
    if left:
        print(f"left running after pytest ended: {'; '.join(left)[:600]}")
    lines = output.strip().splitlines()
    for line in lines:
        if line.startswith(("FAILED ", "ERROR ")):
            print(line[:300])
    print(lines[-1] if lines else "(no pytest output)")
    print(f"wall {int(wall // 60)} min {int(wall % 60)} s; CPU of the run and its children "
          f"{(children.ru_utime + children.ru_stime) / 60:.1f} min on {os.cpu_count()} CPUs; "
          f"the CPUs busy {100 * (busy1 - busy0) / max(1, busy1 - busy0 + idle1 - idle0):.0f}% "
          f"(other processes included)")
    if not rows:
        return done.returncode
    first = min(r["start"] for r in rows)
    for worker in sorted({r["w"] for r in rows}):
        mine = [r for r in rows if r["w"] == worker]
        busy, cpu = sum(r["end"] - r["start"] for r in mine), sum(r["cpu"] for r in mine)
        print(f"  {worker}: {len(mine)} tests, busy {busy:.0f} s, own CPU {cpu:.0f} s, "
              f"last ends at {max(r['end'] for r in mine) - first:.0f} s")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for r in rows:
        entry = files[r["id"].split("::")[0]]
        entry[0] += 1
        entry[1] += r["end"] - r["start"]
        entry[2] += r["cpu"]
        entry[3] += r.get("tree", 0.0)
    print(f"all tests: worker CPU {sum(r['cpu'] for r in rows):.0f} s; with the processes under the "
          f"workers {sum(r.get('tree', 0.0) for r in rows):.0f} s")
    print(f"{'wall s':>8} {'CPU s':>7} {'tree s':>7} {'tests':>5}  file (CPU: the worker's own; tree: with "
          "its servers and subprocesses)")
    for key in (1, 3):
        print("by wall time:" if key == 1 else "by tree CPU:")
        for name, (count, spent, cpu, tree) in sorted(files.items(), key=lambda kv: -kv[1][key])[:args.top]:
            print(f"{spent:8.1f} {cpu:7.1f} {tree:7.1f} {count:5d}  {name}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
