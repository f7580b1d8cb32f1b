"""Unit tests: the pure core and the in-memory cluster (snapshots), no server."""
