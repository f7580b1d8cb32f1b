#!/usr/bin/env bash
# Builds ocl-crc-render: the MCO's own container-runtime-config controller code (ClusterImagePolicy
# -> policy.json and registries.d), from ../shared/mco/mco-src.tar.gz, offline (-mod=vendor), with
# the two files of this folder added to an unpacked copy of that tree: ocl_crcrender.go into the
# controller's package (to reach its unexported functions), main.go as cmd/ocl-crc-render. Once per
# tarball and per version of these files, into a cache outside the checkout. Prints the binary's path.
# The signing tests run it (tests/realtools/test_signing.py). The tree is ours alone: the MCO harness
# of tests/tools/mco unpacks its own.
#   OCL_MCO_SRC        the tarball (default ../shared/mco/mco-src.tar.gz beside the checkout)
#   OCL_CRCRENDER_CACHE  the cache root (default ~/.cache/ocl-reconciler)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="${OCL_MCO_SRC:-$here/../../../../shared/mco/mco-src.tar.gz}"
[ -f "$src" ] || { echo "error: $src is absent (../shared/mco/ of the workplace)" >&2; exit 1; }
tree_key="$(sha256sum "$src" | cut -c1-12)"
ours="$(cat "$here/ocl_crcrender.go" "$here/main.go" | sha256sum | cut -c1-12)"
tree="${OCL_CRCRENDER_CACHE:-$HOME/.cache/ocl-reconciler}/mco-crc-$tree_key"
bin="$tree/bin/ocl-crc-render-$ours"
if [ -x "$bin" ]; then
  echo "$bin"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build ocl-crc-render)" >&2; exit 1; }
if [ ! -f "$tree/.unpacked" ]; then
  rm -rf "$tree" && mkdir -p "$tree"
  tar xzf "$src" -C "$tree"
  touch "$tree/.unpacked"
fi
start=$(date +%s)
echo "building ocl-crc-render in $tree (one time, about 5 minutes cold on 2 cores)..." >&2
cp "$here/ocl_crcrender.go" "$tree/pkg/controller/container-runtime-config/ocl_crcrender.go"
mkdir -p "$tree/cmd/ocl-crc-render" "$tree/bin"
cp "$here/main.go" "$tree/cmd/ocl-crc-render/main.go"
cd "$tree"
# the tags of ../shared/mco/README.md: containers/image without gpgme (a C library)
GOFLAGS=-mod=vendor go build -trimpath \
  -tags "containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
  -o "$bin.tmp" ./cmd/ocl-crc-render
mv "$bin.tmp" "$bin"                      # atomic: a killed build leaves no half binary behind
find "$(dirname "$bin")" -maxdepth 1 -name 'ocl-crc-render-*' ! -name "$(basename "$bin")" -delete   # earlier versions
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
