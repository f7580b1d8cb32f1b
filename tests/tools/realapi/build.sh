#!/usr/bin/env bash
# Builds the real test servers (kube-apiserver, etcd) and a kubectl of the same release from the Go
# modules pinned in go.mod, once, into a cache outside the checkout keyed by those versions. Prints
# the cache folder. Go builds test servers only: the product stays Python.
#   build.sh        the kube-apiserver, etcd and kubectl (make realapi)
#   build.sh node   also the node's kubelet, kube-controller-manager and kube-scheduler, of the same
#                   release, in one `go build` so they share its compiled packages (make realnode)
#   OCL_REALAPI_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
k8s="$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$here/go.mod")"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$here/go.mod")"
dir="${OCL_REALAPI_CACHE:-$HOME/.cache/ocl-reconciler}/k8s-$k8s-etcd-$etcd"
outs="kube-apiserver etcd kubectl"
[ "${1:-}" = node ] && outs="$outs kubelet kube-controller-manager kube-scheduler"
have=yes
for out in $outs; do [ -x "$dir/$out" ] || have=""; done
[ -n "$have" ] && { echo "$dir"; exit 0; }
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build the test servers)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
# the version the binaries report (`kubectl version`), as the Kubernetes release build stamps it
stamp="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitVersion=$k8s"
minor="${k8s#v1.}"; minor="${minor%%.*}"
stamp="$stamp -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
targets=""
for out in $outs; do
  [ -x "$dir/$out" ] && continue
  case "$out" in etcd) targets="$targets go.etcd.io/etcd/server/v3" ;; *) targets="$targets k8s.io/kubernetes/cmd/$out" ;; esac
done
echo "building$targets (one time, several minutes)..." >&2
# one `go build` of every missing command: they share most packages. Into a scratch folder, then
# moved: a killed build leaves no half binary behind.
tmp="$(mktemp -d "$dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
go build -buildvcs=false -trimpath -ldflags="-s -w $stamp" -o "$tmp/" $targets
# go names etcd's binary after the element before its module's /v3
if [ -x "$tmp/server" ]; then mv "$tmp/server" "$tmp/etcd"; fi
for out in $outs; do
  if [ -x "$tmp/$out" ]; then mv "$tmp/$out" "$dir/$out"; fi
done
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
