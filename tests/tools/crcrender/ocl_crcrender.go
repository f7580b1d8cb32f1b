// A test-tool file of ocl-reconciler, not part of the MCO: tests/tools/crcrender/build.sh copies it
// into an unpacked copy of ../shared/mco/mco-src.tar.gz (openshift/machine-config-operator @
// 7ff337a4) so that the container-runtime-config controller's own unexported code can be called.
// Nothing here decides anything: every rule is the controller's.

package containerruntimeconfig

import (
	"fmt"

	ign3types "github.com/coreos/ignition/v2/config/v3_5/types"
	apicfgv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"

	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
)

// OCLRenderedFiles is what the controller writes for a pool's role when these ClusterImagePolicies
// exist and the cluster's Image config is empty: the files of its registries MachineConfig
// (99-<role>-generated-registries), by path.
type OCLRenderedFiles map[string][]byte

// OCLRenderClusterImagePolicies runs the steps of (*Controller).syncImageConfig
// (container_runtime_config_controller.go) that make a pool's registries MachineConfig:
// getValidBlockedAndAllowedRegistries for the release image and an Image config "cluster" with an
// empty spec, getValidScopePolicies for the ClusterImagePolicies (no namespaced ImagePolicy), then
// registriesConfigIgnition for the role (which renders the role's templates for the original
// policy.json, updatePolicyJSON, generateSigstoreRegistriesdConfig).
func OCLRenderClusterImagePolicies(templateDir string, cc *mcfgv1.ControllerConfig, role, releaseImage string,
	cips []*apicfgv1.ClusterImagePolicy) (OCLRenderedFiles, error) {
	imgSpec := &apicfgv1.ImageSpec{}
	registriesBlocked, policyBlocked, allowedRegs, err := getValidBlockedAndAllowedRegistries(releaseImage, imgSpec, nil, nil)
	if err != nil {
		return nil, err
	}
	clusterScopePolicies, scopeNamespacePolicies, err := getValidScopePolicies(cips, nil, nil)
	if err != nil {
		return nil, err
	}
	ign, err := registriesConfigIgnition(templateDir, cc, role, releaseImage,
		imgSpec.RegistrySources.InsecureRegistries, registriesBlocked, policyBlocked, allowedRegs,
		imgSpec.RegistrySources.ContainerRuntimeSearchRegistries, nil, nil, nil, clusterScopePolicies, scopeNamespacePolicies)
	if err != nil {
		return nil, err
	}
	return oclFiles(ign.Storage.Files)
}

func oclFiles(files []ign3types.File) (OCLRenderedFiles, error) {
	out := OCLRenderedFiles{}
	for _, f := range files {
		if f.Contents.Source == nil {
			continue
		}
		data, err := ctrlcommon.DecodeIgnitionFileContents(f.Contents.Source, f.Contents.Compression)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		out[f.Path] = data
	}
	return out, nil
}
