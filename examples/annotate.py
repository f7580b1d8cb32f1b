#!/usr/bin/env python3
"""Sets annotations of a MachineConfigPool in a snapshot, as `oc annotate mcp POOL KEY=VALUE
--overwrite` would on a cluster, for `make demo`:

    python3 examples/annotate.py IN.yaml OUT.yaml POOL ocl-reconciler.io/rebuild=1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, after an installed package

from reconcile.cluster import snapshot  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) < 4 or not all("=" in a for a in args[3:]):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    items = snapshot.load(args[0])
    found = [o for o in items if o["kind"] == "MachineConfigPool" and o["metadata"]["name"] == args[2]]
    if not found:
        print(f"error: {args[0]} has no MachineConfigPool {args[2]}", file=sys.stderr)
        return 2
    found[0]["metadata"].setdefault("annotations", {}).update(a.split("=", 1) for a in args[3:])
    snapshot.write(args[1], items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
