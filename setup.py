"""The one thing pyproject.toml cannot say: which packages ship.

They are discovered, never listed by hand (a hand-kept list shipped a wheel without 21 modules:
issue 49), and `manifests/` (the templates and data tables, a top-level folder of the checkout)
ships inside the package as `reconcile.manifests`, where `imagebuild/templates.py` finds it once
installed. Everything else is in pyproject.toml; tests/installed/ holds the wheel to the tree.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["reconcile", "reconcile.*"]), "reconcile.manifests"],
      package_dir={"reconcile.manifests": "manifests"})
