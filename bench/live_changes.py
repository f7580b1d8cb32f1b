"""What each kind of change costs a pool, as docs/rollout.md's table gives it (issue 39): builds and
reboots per node with `liveChanges: apply`, with `rebuild` (the version before), and under the MCO's
own layering's rule. By default on the real kube-apiserver with the MCO's own render and node
controllers and the real daemon's verdicts (tests/support/livereal.py, through
tests/realapi/test_realapi_live_table.py with OCL_LIVE_TABLE=all; needs `make realapi mco` and
docker-registry); `--imitations` measures on tests/support/mcorender.py and mconode.py instead
(tests/support/livemeasure.py). The MCO's own layering is computed from its rule in both. Prints the
Markdown table."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from tests.support import livemeasure  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imitations", action="store_true", help="the render and node controllers imitated")
    args = parser.parse_args()
    binary = livemeasure_binary()
    os.environ.setdefault("OCL_RECONCILE_NOW", "2026-11-29T12:00:00Z")
    started = time.monotonic()
    if args.imitations:
        rows = livemeasure.table(binary)
        where = "the imitations of the render and node controllers"
    else:
        rows = real_table(binary)
        where = "the real kube-apiserver and the MCO's own render and node controllers"
    print(livemeasure.markdown(rows))
    print(f"\n{len(rows)} change kinds on {where}, the daemon's verdicts the real daemon's, in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


def real_table(binary: Path) -> list[tuple[str, livemeasure.Row, livemeasure.Row, livemeasure.Row]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows"
        env = dict(os.environ, OCL_LIVE_TABLE="all", OCL_LIVE_TABLE_OUT=str(out), OCL_REALAPI="require",
                   OCL_MCO="require")
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                        "tests/realapi/test_realapi_live_table.py"], cwd=ROOT, env=env, check=False)
        rows = {mode: json.loads(Path(f"{out}.{mode}").read_text()) for mode in ("apply", "rebuild")}
    return [(kind, livemeasure.Row(**rows["apply"][kind]), livemeasure.Row(**rows["rebuild"][kind]),
             livemeasure.mco_layering(kind, binary)) for kind in livemeasure.CHANGES]


def livemeasure_binary() -> Path:
    from tests.support import mcoreal
    binary = mcoreal.cache_dir() / "ocl-mco-harness"
    if not binary.is_file():
        sys.exit(f"{binary} is not built: run `make mco` first")
    return binary


if __name__ == "__main__":
    sys.exit(main())
