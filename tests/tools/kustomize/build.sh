#!/usr/bin/env bash
# Builds the real `kustomize` CLI from the Go module pinned in go.mod, once, into a cache outside the
# checkout keyed by that version (../gocli.sh). Prints the cache folder. The doc test runs it
# (tests/realapi/test_admin_docs.py: docs/admin.md's `kustomize create`, `kustomize edit set image`).
#   OCL_KUSTOMIZE_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${OCL_KUSTOMIZE_CACHE:-}" exec bash "$here/../gocli.sh" "$here" kustomize sigs.k8s.io/kustomize/kustomize/v5 \
  sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/api/provenance.version "under a minute"
