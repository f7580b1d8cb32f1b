#!/usr/bin/env bash
# Builds Argo CD's real `argocd` CLI from the Go module pinned in go.mod (its `replace` block copied
# from that release's go.mod), once, into a cache outside the checkout keyed by that version, with
# the release's manifests/install.yaml beside it (the argocd-cm an install starts from). Prints the
# cache folder. The health-check tests run it (tests/realtools/test_argocd_health.py).
#   OCL_ARGOCD_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module=github.com/argoproj/argo-cd/v2
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/go.mod")"
dir="${OCL_ARGOCD_CACHE:-$HOME/.cache/ocl-reconciler}/argocd-$version"
if [ -x "$dir/argocd" ] && [ -f "$dir/install.yaml" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build argocd)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
echo "building argocd $version from $module/cmd (one time, about 5 minutes on 2 cores)..." >&2
# cmd/main.go picks the CLI by the binary's name (argocd); the version as the release's Makefile stamps it
go build -buildvcs=false -trimpath -ldflags="-s -w -X $module/common.version=${version#v}" \
  -o "$dir/argocd.tmp" "$module/cmd"
cp "$(go list -m -f '{{.Dir}}' "$module")/manifests/install.yaml" "$dir/install.yaml.tmp"
chmod u+w "$dir/install.yaml.tmp"
mv "$dir/install.yaml.tmp" "$dir/install.yaml"
mv "$dir/argocd.tmp" "$dir/argocd"          # atomic: a killed build leaves no half binary behind
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
