"""`python -m reconcile` is the same as the `ocl-reconcile` console script."""

import sys

from reconcile.cli import main

sys.exit(main())
