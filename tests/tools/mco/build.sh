#!/usr/bin/env bash
# Builds ocl-mco-harness (tests/tools/mco/cmd/, with tests/tools/mco/daemon/ compiled into the MCO's
# pkg/daemon) against the Machine Config Operator's own code: unpacks ../shared/mco/mco-src.tar.gz
# once into a cache outside the checkout keyed by the tarball's hash, copies our harness source into
# the unpacked tree, and builds it there offline from the vendored modules. Rebuilds only when our
# harness source changes. Prints the cache folder (the binary is ocl-mco-harness in it). Go builds
# test tools only: the product stays Python.
#   OCL_MCO_CACHE  the cache root (default ~/.cache/ocl-reconciler)
#   OCL_MCO_SRC    the MCO source tarball (default ../shared/mco/mco-src.tar.gz beside the checkout)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
tarball="${OCL_MCO_SRC:-$root/../shared/mco/mco-src.tar.gz}"
[ -f "$tarball" ] || { echo "error: $tarball is absent (the MCO's source, ../shared/mco/README.md)" >&2; exit 1; }
dir="${OCL_MCO_CACHE:-$HOME/.cache/ocl-reconciler}/mco-$(sha256sum "$tarball" | cut -c1-12)"
# the harness's own source decides whether the binary is current
stamp="$(cd "$here" && find cmd daemon render -type f -name '*.go' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
if [ -x "$dir/ocl-mco-harness" ] && [ "$(cat "$dir/ocl-mco-harness.source" 2>/dev/null)" = "$stamp" ]; then
  echo "$dir"; exit 0
fi
command -v go >/dev/null || { echo "error: go is not on the PATH (needed once to build the MCO harness)" >&2; exit 1; }
mkdir -p "$dir"
start=$(date +%s)
if [ ! -f "$dir/src/.unpacked" ]; then
  rm -rf "$dir/src.tmp" && mkdir -p "$dir/src.tmp"
  tar xzf "$tarball" -C "$dir/src.tmp"
  touch "$dir/src.tmp/.unpacked"
  rm -rf "$dir/src" && mv "$dir/src.tmp" "$dir/src"      # atomic: a killed unpack leaves no half tree
fi
rm -rf "$dir/src/cmd/ocl-mco-harness"
cp -r "$here/cmd/ocl-mco-harness" "$dir/src/cmd/ocl-mco-harness"
cp "$here/daemon/zz_ocl_verdict.go" "$dir/src/pkg/daemon/zz_ocl_verdict.go"
# the render controller's fixed renderDelay, the one change to the MCO's code (render/zz_ocl_render_delay.go)
cp "$here/render/zz_ocl_render_delay.go" "$dir/src/pkg/controller/render/zz_ocl_render_delay.go"
sed -i 's/^\(\s*renderDelay = \).*$/\1OclRenderDelayForTests/' "$dir/src/pkg/controller/render/render_controller.go"
grep -q 'renderDelay = OclRenderDelayForTests' "$dir/src/pkg/controller/render/render_controller.go" || {
  echo "error: renderDelay not found in pkg/controller/render/render_controller.go" >&2; exit 1; }
echo "building ocl-mco-harness against the MCO source in $dir/src (one time, about 5 minutes cold on 2 cores)..." >&2
# ../shared/mco/README.md: offline from vendor/, tags that keep containers/image off gpgme. The
# controller version (pkg/version.Hash) is "ocl-test", the one the tests' MCO-generated
# MachineConfigs claim (tests/support/mcorender.py); Raw names the MCO commit of the tarball.
pkg=github.com/openshift/machine-config-operator/pkg/version
(cd "$dir/src" && GOFLAGS=-mod=vendor GOPROXY=off GOWORK=off GOTOOLCHAIN=local go build -buildvcs=false -trimpath \
  -tags "containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
  -ldflags "-s -w -X $pkg.Hash=ocl-test -X $pkg.Raw=v0.0.0-7ff337a4ffac" \
  -o "$dir/ocl-mco-harness.tmp" ./cmd/ocl-mco-harness)
mv "$dir/ocl-mco-harness.tmp" "$dir/ocl-mco-harness"      # atomic: a killed build leaves no half binary behind
echo "$stamp" > "$dir/ocl-mco-harness.source"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
