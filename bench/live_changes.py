"""What each kind of change costs a pool, as docs/rollout.md's table gives it (issue 39): builds and
reboots per node with `liveChanges: apply`, with `rebuild` (the version before), and under the MCO's
own layering's rule; the daemon's verdicts from the real daemon (`ocl-mco-harness`, `make mco`). See
tests/support/livemeasure.py for what is real and what is imitated. Prints the Markdown table."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from tests.support import livemeasure  # noqa: E402


def main() -> int:
    binary = livemeasure_binary()
    started = time.monotonic()
    print(livemeasure.markdown(livemeasure.table(binary)))
    print(f"\n{len(livemeasure.CHANGES)} change kinds in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


def livemeasure_binary() -> Path:
    from tests.support import mcoreal
    binary = mcoreal.cache_dir() / "ocl-mco-harness"
    if not binary.is_file():
        sys.exit(f"{binary} is not built: run `make mco` first")
    return binary


if __name__ == "__main__":
    sys.exit(main())
