// Command ocl-crc-render: the files the MCO's container-runtime-config controller writes for a
// pool when the given ClusterImagePolicies exist (/etc/containers/policy.json and
// /etc/containers/registries.d/sigstore-registries.yaml), made by the controller's own code
// (ocl_crcrender.go). A test tool of ocl-reconciler (tests/realtools/test_signing.py), built by
// tests/tools/crcrender/build.sh inside an unpacked copy of ../shared/mco/mco-src.tar.gz.
//
// Usage: ocl-crc-render --policies FILE.yaml --release-image IMAGE --out DIR [--role worker]
//
// FILE.yaml holds ClusterImagePolicy objects (what `kubectl kustomize` prints: documents separated
// by ---). Each rendered file is written under DIR at its node path (DIR/etc/containers/...).
// Exit 0 when rendered; 1 with a one-line error when the controller refuses; 2 on a usage error.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apicfgv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	crc "github.com/openshift/machine-config-operator/pkg/controller/container-runtime-config"
)

func main() {
	policies := flag.String("policies", "", "a YAML file of ClusterImagePolicy objects (required)")
	release := flag.String("release-image", "", "the cluster's release image (ClusterVersion status.desired.image) (required)")
	out := flag.String("out", "", "the folder the node files are written under (required)")
	role := flag.String("role", "worker", "the pool's role, whose templates give the original policy.json")
	templates := flag.String("templates", "templates", "the MCO's templates folder")
	flag.Parse()
	if *policies == "" || *release == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "error: --policies, --release-image and --out are required (see --help)")
		os.Exit(2)
	}
	cips, err := readPolicies(*policies)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %s: %v\n", *policies, err)
		os.Exit(2)
	}
	files, err := crc.OCLRenderClusterImagePolicies(*templates, controllerConfig(), *role, *release, cips)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: the controller refused: %v\n", err)
		os.Exit(1)
	}
	for path, data := range files {
		dest := filepath.Join(*out, path)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			os.Exit(1)
		}
		if err := os.WriteFile(dest, data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(path)
	}
}

func readPolicies(path string) ([]*apicfgv1.ClusterImagePolicy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var cips []*apicfgv1.ClusterImagePolicy
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		cip := &apicfgv1.ClusterImagePolicy{}
		if err := yaml.UnmarshalStrict(doc, cip); err != nil {
			return nil, err
		}
		if cip.Kind != "ClusterImagePolicy" {
			return nil, fmt.Errorf("a %s, not a ClusterImagePolicy", cip.Kind)
		}
		cips = append(cips, cip)
	}
	if len(cips) == 0 {
		return nil, errors.New("no ClusterImagePolicy")
	}
	return cips, nil
}

// controllerConfig: the least the role's templates need to render (GenerateMachineConfigsForRole
// renders all of them; other templates read the API URLs and the platform). The files compared here
// do not depend on it: the template's policy.json is static text, the rest comes from the policies.
func controllerConfig() *mcfgv1.ControllerConfig {
	return &mcfgv1.ControllerConfig{
		Spec: mcfgv1.ControllerConfigSpec{
			ClusterDNSIP: "172.30.0.10",
			Platform:     "none",
			Infra: &apicfgv1.Infrastructure{
				Status: apicfgv1.InfrastructureStatus{
					InfrastructureName:   "ocl-test",
					APIServerURL:         "https://api.ocl.example.com:6443",
					APIServerInternalURL: "https://api-int.ocl.example.com:6443",
					EtcdDiscoveryDomain:  "ocl.example.com",
					PlatformStatus:       &apicfgv1.PlatformStatus{Type: apicfgv1.NonePlatformType},
				},
			},
			DNS: &apicfgv1.DNS{Spec: apicfgv1.DNSSpec{BaseDomain: "example.com"}},
		},
	}
}
