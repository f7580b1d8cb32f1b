#!/usr/bin/env bash
# Builds the real test servers (kube-apiserver, etcd) and a kubectl of the same release from the Go
# modules pinned in go.mod, once, into a cache outside the checkout keyed by those versions. Prints
# the cache folder. Go builds test servers only: the product stays Python.
#   OCL_REALAPI_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
k8s="$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$here/go.mod")"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$here/go.mod")"
dir="${OCL_REALAPI_CACHE:-$HOME/.cache/ocl-reconciler}/k8s-$k8s-etcd-$etcd"
if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -x "$dir/kubectl" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build the test servers)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
for target in k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kubectl; do
  case "$target" in go.etcd.io/*) out=etcd ;; *) out="${target##*/}" ;; esac
  [ -x "$dir/$out" ] && continue
  echo "building $out from $target (one time, a few minutes)..." >&2
  # the version the binaries report (`kubectl version`), as the Kubernetes release build stamps it
  stamp="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitVersion=$k8s"
  minor="${k8s#v1.}"; minor="${minor%%.*}"
  stamp="$stamp -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  go build -buildvcs=false -trimpath -ldflags="-s -w $stamp" -o "$dir/$out.tmp" "$target"
  mv "$dir/$out.tmp" "$dir/$out"          # atomic: a killed build leaves no half binary behind
done
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
