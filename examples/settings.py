#!/usr/bin/env python3
"""Sets keys of the ConfigMap on-cluster-build-config in a snapshot, as `oc patch` would on a
cluster, for `make demo`:

    python3 examples/settings.py IN.yaml OUT.yaml rollout=machineconfig
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, after an installed package

from reconcile.cluster import snapshot  # noqa: E402
from reconcile.imagebuild import settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) < 3 or not all("=" in a for a in args[2:]):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    items = snapshot.load(args[0])
    found = [o for o in items if o["kind"] == "ConfigMap" and o["metadata"]["name"] == settings.BUILD_CONFIG]
    if not found:
        print(f"error: {args[0]} has no ConfigMap {settings.BUILD_CONFIG}", file=sys.stderr)
        return 2
    found[0].setdefault("data", {}).update(a.split("=", 1) for a in args[2:])
    snapshot.write(args[1], items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
