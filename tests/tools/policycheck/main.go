// Command policycheck asks containers/image itself whether a container image may run under a
// containers-policy.json(5) and a registries.d(5) folder: the check skopeo, podman, CRI-O and
// rpm-ostree (through skopeo's image proxy) make before they pull. A test tool of ocl-reconciler
// (tests/realtools/test_signing.py); never part of the product.
//
// It does what containers/image's copy.Image does before it copies an image
// (containers/container-libs, image/copy/copy.go: `srcRef.NewImageSource`,
// `image.UnparsedInstance(rawSource, nil)`; image/copy/single.go:
// `c.policyContext.IsRunningImageAllowed(ctx, unparsedImage)`), so the signatures are fetched from
// the registry as a node would: for a `sigstoreSigned` requirement, the sigstore attachment
// `sha256-<digest>.sig` that registries.d's `use-sigstore-attachments: true` turns on
// (image/docker/docker_image_src.go, GetSignaturesWithFormat).
//
// Usage:
//
//	policycheck --policy policy.json --registries-d DIR --image docker://HOST/REPO@sha256:... [--cert-dir DIR]
//
// It prints one JSON object, {"allowed": bool, "error": "...", "errorType": "..."}, and exits 0
// whenever the policy was evaluated (allowed or not); 2 on a usage error, 1 when the policy
// cannot be read.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

type verdict struct {
	Allowed bool   `json:"allowed"`
	Image   string `json:"image"`
	Error   string `json:"error"`
	// ErrorType is the Go type of the error: signature.PolicyRequirementError for a refusal by a
	// requirement itself, others (e.g. a registry that cannot be reached) say it was not the policy.
	ErrorType string `json:"errorType,omitempty"`
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `policycheck: may this image run under this policy.json, as containers/image decides?

Usage: policycheck --policy FILE --registries-d DIR --image docker://HOST/REPO@sha256:DIGEST [--cert-dir DIR]

Prints {"allowed": true|false, "image": ..., "error": ..., "errorType": ...} and exits 0 when the
policy was evaluated, 1 when it could not be read, 2 on a usage error.

`)
		flag.PrintDefaults()
	}
	policyPath := flag.String("policy", "", "the containers-policy.json(5) to evaluate (required)")
	registriesD := flag.String("registries-d", "", "the registries.d(5) folder: where use-sigstore-attachments is set (required)")
	imageName := flag.String("image", "", "the image, in containers-transports(5) form: docker://HOST/REPO@sha256:... (required)")
	certDir := flag.String("cert-dir", "", "a folder of CA certificates (*.crt) the registry's TLS certificate is checked against")
	registriesConf := flag.String("registries-conf", "", "a containers-registries.conf(5) (mirrors); default: an empty one, not the host's")
	flag.Parse()
	if *policyPath == "" || *registriesD == "" || *imageName == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "error: --policy, --registries-d and --image are required, and nothing else (see --help)")
		os.Exit(2)
	}
	// the docker transport alone (what a node pulls from); alltransports would link containers/storage
	ref, err := parseDocker(*imageName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: --image %q: %v\n", *imageName, err)
		os.Exit(2)
	}
	policy, err := signature.NewPolicyFromFile(*policyPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: --policy %s: %v\n", *policyPath, err)
		os.Exit(1)
	}
	// the host's registries.conf and registries.conf.d are not the node's: an empty file, and a
	// folder that does not exist (containers/image skips a missing one)
	empty, err := os.MkdirTemp("", "policycheck-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(empty)
	if *registriesConf == "" {
		*registriesConf = filepath.Join(empty, "registries.conf")
		if err := os.WriteFile(*registriesConf, nil, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			os.Exit(1)
		}
	}
	sys := &types.SystemContext{
		RegistriesDirPath:           *registriesD,
		SystemRegistriesConfPath:    *registriesConf,
		SystemRegistriesConfDirPath: filepath.Join(empty, "registries.conf.d"),
		DockerCertPath:              *certDir,
		SignaturePolicyPath:         *policyPath,
	}
	out := verdict{Image: *imageName}
	out.Allowed, err = allowed(context.Background(), sys, policy, ref)
	if err != nil {
		out.Allowed = false // paranoid, as copy/single.go is: an error is never an allowance
		out.Error = err.Error()
		var pre signature.PolicyRequirementError
		if errors.As(err, &pre) {
			out.ErrorType = "PolicyRequirementError"
		} else {
			out.ErrorType = fmt.Sprintf("%T", err)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.RemoveAll(empty)
		os.Exit(1)
	}
}

func parseDocker(name string) (types.ImageReference, error) {
	rest, ok := strings.CutPrefix(name, docker.Transport.Name()+":")
	if !ok {
		return nil, fmt.Errorf("not a %s: reference", docker.Transport.Name())
	}
	return docker.Transport.ParseReference(rest)
}

// allowed opens the image as copy.Image opens its source, and evaluates the policy for it.
func allowed(ctx context.Context, sys *types.SystemContext, policy *signature.Policy, ref types.ImageReference) (bool, error) {
	pc, err := signature.NewPolicyContext(policy)
	if err != nil {
		return false, err
	}
	defer func() { _ = pc.Destroy() }()
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return false, err
	}
	defer src.Close()
	return pc.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, nil))
}
