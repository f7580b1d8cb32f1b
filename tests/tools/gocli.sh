#!/usr/bin/env bash
# Builds the CLI of a Go module pinned in a tool's go.mod, once, into a cache outside the checkout
# keyed by that version, and prints the cache folder (the binary is NAME in it). The tools' build.sh
# call it (kustomize/, cosign/); Go builds test tools only.
#   gocli.sh DIR NAME MODULE PACKAGE LDFLAG_X HOW_LONG
#     DIR       the tool's folder (its go.mod pins MODULE)
#     NAME      the binary, and the cache folder's prefix (NAME-<version>)
#     PACKAGE   what `go build` builds (MODULE or a command under it)
#     LDFLAG_X  the variable the release stamps its version into (-X LDFLAG_X=<version>)
#     HOW_LONG  said while it builds
#   CACHE       the cache root (the tool's OCL_*_CACHE; default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$1" name="$2" module="$3" package="$4" stamp="$5" how_long="$6"
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/go.mod")"
dir="${CACHE:-$HOME/.cache/ocl-reconciler}/$name-$version"
if [ -x "$dir/$name" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build $name)" >&2; exit 1; }
mkdir -p "$dir"
cd "$here"
start=$(date +%s)
echo "building $name $version from $package (one time, $how_long)..." >&2
go build -buildvcs=false -trimpath -ldflags="-s -w -X $stamp=$version" -o "$dir/$name.tmp" "$package"
mv "$dir/$name.tmp" "$dir/$name"            # atomic: a killed build leaves no half binary behind
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
