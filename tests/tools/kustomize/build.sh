#!/usr/bin/env bash
# Builds the real `kustomize` CLI from the Go module pinned in go.mod, once, into a cache outside the
# checkout keyed by that version. Prints the cache folder. The doc test runs it
# (tests/realapi/test_admin_docs.py: docs/admin.md's `kustomize create`, `kustomize edit set image`).
#   OCL_KUSTOMIZE_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module=sigs.k8s.io/kustomize/kustomize/v5
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/go.mod")"
dir="${OCL_KUSTOMIZE_CACHE:-$HOME/.cache/ocl-reconciler}/kustomize-$version"
if [ -x "$dir/kustomize" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build kustomize)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
echo "building kustomize $version from $module (one time, under a minute)..." >&2
go build -buildvcs=false -trimpath -ldflags="-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$version" \
  -o "$dir/kustomize.tmp" "$module"
mv "$dir/kustomize.tmp" "$dir/kustomize"      # atomic: a killed build leaves no half binary behind
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
