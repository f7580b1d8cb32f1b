"""Tests against a real kube-apiserver and etcd (tests/support/realserver.py)."""
