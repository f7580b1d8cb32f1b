#!/usr/bin/env bash
# Builds policycheck (main.go: does this policy.json allow this image, as containers/image decides)
# against the containers/image release pinned in go.mod, with `-tags containers_image_openpgp` (its
# pure-Go OpenPGP: no gpgme, a C library), once per version of go.mod and main.go, into a cache
# outside the checkout. Prints the binary's path. The signing tests run it
# (tests/realtools/test_signing.py).
#   OCL_POLICYCHECK_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module=go.podman.io/image/v5
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/go.mod")"
ours="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)"
dir="${OCL_POLICYCHECK_CACHE:-$HOME/.cache/ocl-reconciler}/policycheck-image-$version"
bin="$dir/policycheck-$ours"
if [ -x "$bin" ]; then
  echo "$bin"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build policycheck)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
echo "building policycheck against $module $version (one time, about 2 minutes on 2 cores)..." >&2
go build -buildvcs=false -trimpath -tags containers_image_openpgp -o "$bin.tmp" .
mv "$bin.tmp" "$bin"                      # atomic: a killed build leaves no half binary behind
find "$(dirname "$bin")" -mindepth 1 -maxdepth 1 -name 'policycheck-*' ! -name "$(basename "$bin")" -delete   # earlier versions
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
