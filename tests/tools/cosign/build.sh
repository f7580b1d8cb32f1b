#!/usr/bin/env bash
# Builds sigstore's real `cosign` CLI from the Go module pinned in go.mod (cosign's own go.mod has no
# `replace` block, so plain requirements suffice), once, into a cache outside the checkout keyed by
# that version (../gocli.sh; the version stamped as cosign's release Makefile does, through
# sigs.k8s.io/release-utils/version). Prints the cache folder. The signing tests run it
# (tests/realtools/test_signing.py).
#   OCL_COSIGN_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${OCL_COSIGN_CACHE:-}" exec bash "$here/../gocli.sh" "$here" cosign github.com/sigstore/cosign/v2 \
  github.com/sigstore/cosign/v2/cmd/cosign sigs.k8s.io/release-utils/version.gitVersion "about 8 minutes on 2 cores"
