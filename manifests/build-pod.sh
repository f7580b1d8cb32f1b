# Build the layered OS image and push it; every path comes from the Pod's env (set explicitly in
# the pod spec), so the same script runs in the Pod and in the test harness.
#
# The build storage (docs/design.md, "The build Pod's disk"), from two more env vars:
#   STORAGE_DRIVER     vfs, overlay, or auto: overlay where buildah can mount it natively in its
#                      user namespace (native_overlay below), else vfs.
#   BUILD_STORAGE_DIR  optional: a directory on a volume that outlives the Pod. buildah keeps its
#                      images and its blob cache there (XDG_DATA_HOME), so a rebuild reuses the base
#                      image; after the build, pushed or failed, every image the Dockerfile does
#                      not name is removed.
#                      Unset, not writable by this uid (a volume without fsGroup applied), or vfs on
#                      a filesystem without reflink (below): the storage is under $HOME and goes with
#                      the Pod.
#   BUILD_PLATFORM     optional: linux/<arch>, a build under emulation (settings emulatedArchitectures)
#                      on a node of another architecture: buildah build --platform.
# A build that fails for want of space says so in its termination message: "build storage full: ...".
set -eu
# $HOME is the Pod's emptyDir and starts empty, but the context directory may be a used one (a test
# harness's, the script run again): an earlier build's files (a part of a larger MachineConfig) must
# not reach this one.
rm -rf "$CONTEXT_DIR/machineconfig"
mkdir -p "$CONTEXT_DIR/machineconfig"
# ConfigMap volumes hold symlinks into ..data; copy real files into the build context.
# One file, or numbered parts of a MachineConfig larger than one ConfigMap.
cp -L "$MACHINECONFIG_DIR"/machineconfig.json.gz* "$CONTEXT_DIR/machineconfig/"
# Build inputs (Secrets and ConfigMaps found by label) are mounted into every RUN step, at the
# same path as in this container (VOLUME_ROOT is empty here; a test harness points it elsewhere).
set --
for path in ${BUILD_VOLUMES:-}; do
  set -- "$@" --volume "${VOLUME_ROOT:-}$path:$path:ro"
done
# The cluster's signature policy, when the rendered MachineConfig has one (CONTAINERS_REGISTRIES_CONF,
# its mirrors, is read by buildah from the env). The service CA's directory is added to the system
# CAs for every registry (an empty directory adds nothing).
policy=${SIGNATURE_POLICY:+--signature-policy=$SIGNATURE_POLICY}

# A build that keeps nothing on the volume ($1: why, said in the log): its storage is in $HOME, the
# Pod's emptyDir, as without a volume.
keep_nothing() {
  echo "build storage: $1: this build keeps nothing there" >&2
  BUILD_STORAGE_DIR=
  export XDG_DATA_HOME="$HOME/.ocl-storage"
  graphroot=$XDG_DATA_HOME/containers/storage
  mkdir -p "$graphroot"
}

# Whether this uid can make the graph root on the volume and write a file where the build does: the
# volume's root (the reflink check below), the graph root's directory (the overlay check's storage)
# and the graph root. A CSI driver that does not apply the Pod's fsGroup leaves the volume's root
# root-owned (0755).
writable() {
  mkdir -p "$graphroot" 2>/dev/null || return 1
  for dir in "$BUILD_STORAGE_DIR" "${graphroot%/*}" "$graphroot"; do
    probe=$(mktemp "$dir/.ocl-write.XXXXXX" 2>/dev/null) || return 1
    rm -f "$probe"
  done
}

if [ -n "${BUILD_STORAGE_DIR:-}" ]; then
  export XDG_DATA_HOME="$BUILD_STORAGE_DIR"
fi
graphroot=${XDG_DATA_HOME:-$HOME/.local/share}/containers/storage
if [ -n "${BUILD_STORAGE_DIR:-}" ] && ! writable; then
  keep_nothing "$BUILD_STORAGE_DIR is not writable by uid $(id -u)"
fi
mkdir -p "$graphroot"

# Our own storage.conf, for the check below and for the build (CONTAINERS_STORAGE_CONF takes the
# place of the user's own, $XDG_CONFIG_HOME or $HOME/.config/containers/storage.conf, and of /etc's):
# the builder image's may name a mount program (quay.io/buildah/stable's does, in both places),
# which needs /dev/fuse, a device the Pod does not have. For a rootless user, containers/storage
# takes the graph root from XDG_DATA_HOME, not from this file (types/options.go).
storage_conf() {
  printf '[storage]\ndriver = "%s"\n' "$1"
}

# containers/storage drivers/overlay/overlay.go (Init): without a mount program it test-mounts
# overlay in buildah's user namespace, and where that fails it takes fuse-overlayfs from the PATH
# (the MCO's image has it), which fails later without /dev/fuse. So the check is buildah's own
# overlay mount of a working container, in a storage of its own on the same filesystem, with our
# storage.conf whatever the image or a test harness has.
native_overlay() {
  probe=$(mktemp -d "$graphroot.probe.XXXXXX")
  storage_conf overlay > "$probe/storage.conf"
  ok=no
  # shellcheck disable=SC2016
  if CONTAINERS_STORAGE_CONF="$probe/storage.conf" STORAGE_DRIVER=overlay \
       buildah --root "$probe/root" --runroot "$probe/run" unshare sh -c \
       'b="buildah --root $0/root --runroot $0/run"; c=$($b from scratch) && $b mount "$c" && $b umount "$c" && $b rm "$c"' \
       "$probe" > "$probe.log" 2>&1; then
    ok=yes
  else
    # why, before the log goes: buildah's own error line (a warning may come first), else the first
    why=$(sed -n '/^Error: /{p;q;}' "$probe.log")
    echo "build storage: native overlay unavailable: ${why:-$(sed -n 1p "$probe.log")}" >&2
  fi
  # its files may belong to buildah's subordinate ids (a check that failed half-way)
  buildah unshare rm -rf "$probe" 2>/dev/null || rm -rf "$probe" 2>/dev/null || true
  rm -f "$probe.log"
  [ "$ok" = yes ]
}

# Whether a directory's filesystem shares extents on a copy (FICLONE: xfs with reflink, btrfs; not
# ext4). vfs copies every layer in full where it cannot (containers/storage drivers/copy/
# copy_linux.go tries FICLONE first): 46x the unpacked image on ext4 against 1.1x on xfs (docs/
# development.md, "Build cost"). A cp without --reflink (busybox) counts as no. Status 0: it does; 1:
# it does not; 2: no probe file could be written there, so this uid cannot tell.
reflinks() {
  probe=$(mktemp "$1/.ocl-reflink.XXXXXX" 2>/dev/null) || return 2
  ok=no
  if ! echo probe 2>/dev/null > "$probe"; then ok=unwritable
  elif cp --reflink=always "$probe" "$probe.copy" 2>/dev/null; then ok=yes; fi
  rm -f "$probe" "$probe.copy"
  case $ok in yes) return 0 ;; no) return 1 ;; *) return 2 ;; esac
}

# A killed build may have left its checks' probes on a kept volume (one build at a time uses a
# volume: core/storage.py): the overlay check's storage beside the graph root, whose files belong to
# buildah's subordinate ids, and the probe files of the reflink and writability checks.
if [ -n "${BUILD_STORAGE_DIR:-}" ]; then
  for stale in "$graphroot".probe.* "$BUILD_STORAGE_DIR"/.ocl-reflink.* "$BUILD_STORAGE_DIR"/.ocl-write.* \
      "${graphroot%/*}"/.ocl-write.* "$graphroot"/.ocl-write.*; do
    [ ! -e "$stale" ] || buildah unshare rm -rf "$stale" || echo "build storage: could not remove $stale" >&2
  done
fi

driver=$STORAGE_DRIVER
if [ "$driver" = auto ]; then
  if native_overlay; then driver=overlay; else driver=vfs; fi
fi
# The pool's volume is sized for overlay (imagebuild/disk.py): vfs there without reflink would fill
# it, so such a build keeps nothing there; nor does one that cannot write the check's probe file
# there after all (the volume full, say): it is not said to have no reflink.
if [ -n "${BUILD_STORAGE_DIR:-}" ] && [ "$driver" = vfs ]; then
  reflinks "$BUILD_STORAGE_DIR" && reflink=0 || reflink=$?
  case $reflink in
    1) keep_nothing "vfs without reflink on $BUILD_STORAGE_DIR would copy every layer in full" ;;
    2) keep_nothing "$BUILD_STORAGE_DIR is not writable by uid $(id -u)" ;;
  esac
fi
# containers/storage reads STORAGE_DRIVER from the env too (types/options.go): it must name a driver.
export STORAGE_DRIVER="$driver"
echo "build storage: $driver in $graphroot${BUILD_STORAGE_DIR:+ (kept between builds)}"
if [ -z "${CONTAINERS_STORAGE_CONF:-}" ]; then       # a test harness may give its own
  export CONTAINERS_STORAGE_CONF="$HOME/.ocl-storage.conf"
  storage_conf "$driver" > "$CONTAINERS_STORAGE_CONF"
fi

# buildah's output goes to the log; when it fails for want of space, the termination message (the
# reason the reconciler shows) says so instead of the log's last line. Otherwise the reason is the
# log's last line, so a failure's own line is said again at the end when buildah printed others after
# it: its last line that starts with `Error`/`error` (buildah's `Error: ...`; containers/storage's
# `Error during unshare(CLONE_NEWUSER): ...`, after which it says `(Unable to determine exit
# status)`), else its last line. That line is kept in $failure.
buildah_() {
  result=$( { buildah "$@" 2>&1 && status=0 || status=$?; printf '\nocl-status %s\n' "$status"; } |
    { last= error=
      while IFS= read -r line; do
        case $line in
          "ocl-status "*) echo "$line" ;;
          "") ;;
          *) printf '%s\n' "$line" >&2
             last=$line
             case $line in [Ee]rror[:\ ]*) error=$line ;; esac
             case $line in *"no space left on device"*) echo "ocl-full $line" ;; esac ;;
        esac
      done
      printf 'ocl-last %s\nocl-error %s\n' "$last" "$error"; } )
  status=$(printf '%s\n' "$result" | sed -n 's/^ocl-status //p')
  [ "$status" = 0 ] && return 0
  last=$(printf '%s\n' "$result" | sed -n 's/^ocl-last //p')
  failure=$(printf '%s\n' "$result" | sed -n 's/^ocl-error //p')
  if [ -z "$failure" ]; then failure=$last; elif [ "$failure" != "$last" ]; then printf '%s\n' "$failure" >&2; fi
  full=$(printf '%s\n' "$result" | sed -n 's/^ocl-full //p' | head -n 1 | cut -c 1-800)
  if [ -n "$full" ]; then
    printf 'build storage full (%s driver, %s): %s\n' "$driver" "$graphroot" "$full" > "$DIGEST_FILE"
  fi
  return "${status:-1}"
}

if [ -n "${BUILD_STORAGE_DIR:-}" ]; then
  # A kept storage holds one driver's images: drop another's (the node's kernel may differ from the
  # last build's), and working containers a killed build left behind.
  for other in overlay vfs; do
    [ "$other" = "$driver" ] || [ ! -d "$graphroot/$other-layers" ] ||
      buildah unshare rm -rf "$graphroot/$other" "$graphroot/$other-images" "$graphroot/$other-layers" \
        "$graphroot/$other-containers"
  done
  buildah_ rm --all
fi

# The images a Dockerfile names (Docker's Dockerfile reference): FROM's, the instruction in any case
# and maybe indented, with or without --platform; COPY --from's; and every `from` of every RUN
# --mount (flags and mount options are lowercase). A stage's name comes out too: it is no image,
# buildah inspect finds none, and so it keeps nothing.
image_refs() {
  # continued lines (a "\" at the end) joined first, as the Dockerfile's parser joins them
  joined=$(sed -e ':a' -e '/\\$/{N' -e 's/\\\n/ /' -e 'ba' -e '}' "$1")
  printf '%s\n' "$joined" |
    sed -n 's/^[[:space:]]*[Ff][Rr][Oo][Mm][[:space:]]\{1,\}\(--platform=[^[:space:]]*[[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]\{1,\}\).*/\2/p'
  printf '%s\n' "$joined" | sed -n '/^[[:space:]]*[Cc][Oo][Pp][Yy][[:space:]]/p' | tr -s '[:space:]' '\n' |
    sed -n 's/^--from=//p'
  printf '%s\n' "$joined" | tr -s '[:space:]' '\n' | sed -n 's/^--mount=//p' | tr ',' '\n' | sed -n 's/^from=//p'
}

# Bounded: keep only the images the Dockerfile names (the base and extensions images, which the
# next build of this pool most likely uses again); the previous base after an upgrade goes. A
# failure here is only said: it fails no build. Called on the left of ||, where set -e is off: its
# status is said explicitly, 1 if any image could not be listed or removed.
prune_storage() {
  keep=
  pruned=0
  set -f          # a name split from the Dockerfile is no pattern: `COPY --from=*` must not glob
  for ref in $(image_refs "$DOCKERFILE_DIR/Dockerfile"); do
    id=$(buildah inspect --type image --format '{{.FromImageID}}' "$ref" 2>/dev/null) && keep="$keep $id"
  done
  set +f
  # None of them stored (a build that failed before its pull: the registry refused or could not be
  # reached): this build added nothing, and the last base is what the next build most likely shares
  # most layers with.
  if [ -z "$keep" ]; then
    echo "build storage kept as it was: none of the images the Dockerfile names is stored" >&2
    return 0
  fi
  ids=$(buildah images --quiet --no-trunc) || pruned=1
  for id in $ids; do
    case " $keep " in *" ${id#sha256:} "*) ;; *) buildah rmi --force "$id" > /dev/null || pruned=1 ;; esac
  done
  echo "build storage kept: $(buildah images --noheading | wc -l) images" >&2
  return "$pruned"
}

built=0
buildah_ build "$@" ${policy:+"$policy"} ${BUILD_PLATFORM:+--platform "$BUILD_PLATFORM"} \
  --cert-dir "$REGISTRY_CERT_DIR" \
  --storage-driver "$driver" \
  --isolation "$BUILDAH_ISOLATION" \
  --authfile "$BASE_IMAGE_PULL_CREDS" \
  --file "$DOCKERFILE_DIR/Dockerfile" \
  --tag "$TAG" \
  "$CONTEXT_DIR" || built=$?
if [ "$built" = 0 ]; then
  buildah_ push ${policy:+"$policy"} \
    --cert-dir "$REGISTRY_CERT_DIR" \
    --storage-driver "$driver" \
    --authfile "$FINAL_IMAGE_PUSH_CREDS" \
    --digestfile "$DIGEST_FILE" \
    "$TAG" "docker://$TAG" || built=$?
fi

# After a failed build or push too, or a pool whose builds keep failing keeps every base it was
# upgraded to. The build's exit status and termination message stay what they were: a failed
# build's is the log's tail (FallbackToLogsOnError), whose last line the reconciler shows, so
# buildah's failure line ($failure) is said again after the pruning's, on the stream all the pruning
# says goes to: the runtime reads stdout and stderr from two pipes, and a line on stdout may land after it.
if [ -n "${BUILD_STORAGE_DIR:-}" ]; then
  prune_storage || echo "build storage: removing the images this build did not use failed" >&2
  if [ "$built" != 0 ] && [ -n "${failure:-}" ]; then printf '%s\n' "$failure" >&2; fi
fi
exit "$built"
