#!/usr/bin/env bash
# Builds sigstore's real `cosign` CLI from the Go module pinned in go.mod (cosign's own go.mod has no
# `replace` block, so plain requirements suffice), once, into a cache outside the checkout keyed by
# that version. Prints the cache folder. The signing tests run it (tests/realtools/test_signing.py).
#   OCL_COSIGN_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module=github.com/sigstore/cosign/v2
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/go.mod")"
dir="${OCL_COSIGN_CACHE:-$HOME/.cache/ocl-reconciler}/cosign-$version"
if [ -x "$dir/cosign" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build cosign)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
echo "building cosign $version from $module/cmd/cosign (one time, about 8 minutes on 2 cores)..." >&2
# the version as cosign's release Makefile stamps it (sigs.k8s.io/release-utils/version)
go build -buildvcs=false -trimpath -ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$version" \
  -o "$dir/cosign.tmp" "$module/cmd/cosign"
mv "$dir/cosign.tmp" "$dir/cosign"            # atomic: a killed build leaves no half binary behind
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
