"""Tests against tests/support/apiserver.py, the stand-in API server, for faults a real one cannot produce."""
