"""Upstream tools run for real: promtool, argocd, kubectl kustomize."""
