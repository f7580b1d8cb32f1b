"""The pure core: what was observed -> a transition -> the actions of a pool's plan (objects, patches,
Events, image pruning). Imports nothing that does I/O (tests/unit/test_layout.py)."""
