# Build the layered OS image and push it; every path comes from the Pod's env (set explicitly in
# the pod spec), so the same script runs in the Pod and in the test harness.
set -eu
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
buildah build "$@" ${policy:+"$policy"} \
  --cert-dir "$REGISTRY_CERT_DIR" \
  --storage-driver "$STORAGE_DRIVER" \
  --isolation "$BUILDAH_ISOLATION" \
  --authfile "$BASE_IMAGE_PULL_CREDS" \
  --file "$DOCKERFILE_DIR/Dockerfile" \
  --tag "$TAG" \
  "$CONTEXT_DIR"
buildah push ${policy:+"$policy"} \
  --cert-dir "$REGISTRY_CERT_DIR" \
  --storage-driver "$STORAGE_DRIVER" \
  --authfile "$FINAL_IMAGE_PUSH_CREDS" \
  --digestfile "$DIGEST_FILE" \
  "$TAG" "docker://$TAG"
