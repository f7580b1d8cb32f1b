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
//	policycheck --policy policy.json --registries-d DIR --image docker://HOST/REPO@sha256:... [--cert-dir DIR] [--arch ARCH]
//
// With --arch ARCH it copies the image instead, with containers/image's own copy.Image (what
// `skopeo copy` and `podman pull` call) into a temporary dir: from a list (an image index), copy.Image
// takes the instance for linux/ARCH (image/copy/copy.go, CopySystemImage: ChooseInstanceByCompression
// of the SourceCtx's ArchitectureChoice) and evaluates the policy for that instance alone, its
// signatures fetched for its digest (image/copy/single.go, copySingleImage: IsRunningImageAllowed
// before anything else is read). `digest` is then the digest of the manifest it copied.
//
// It prints one JSON object, {"allowed": bool, "error": "...", "errorType": "...", "digest": "..."},
// and exits 0 whenever the policy was evaluated (allowed or not); 2 on a usage error, 1 when the
// policy cannot be read.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/directory"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
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
	// Digest is, with --arch, the digest of the manifest copy.Image copied: a list's chosen instance.
	Digest string `json:"digest,omitempty"`
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `policycheck: may this image run under this policy.json, as containers/image decides?

Usage: policycheck --policy FILE --registries-d DIR --image docker://HOST/REPO@sha256:DIGEST [--cert-dir DIR] [--arch ARCH]

Prints {"allowed": true|false, "image": ..., "error": ..., "errorType": ..., "digest": ...} and exits 0
when the policy was evaluated, 1 when it could not be read, 2 on a usage error. With --arch, the
image is copied by copy.Image as a linux/ARCH machine pulls it: a list's instance for it, alone.

`)
		flag.PrintDefaults()
	}
	policyPath := flag.String("policy", "", "the containers-policy.json(5) to evaluate (required)")
	registriesD := flag.String("registries-d", "", "the registries.d(5) folder: where use-sigstore-attachments is set (required)")
	imageName := flag.String("image", "", "the image, in containers-transports(5) form: docker://HOST/REPO@sha256:... (required)")
	certDir := flag.String("cert-dir", "", "a folder of CA certificates (*.crt) the registry's TLS certificate is checked against")
	arch := flag.String("arch", "", "copy the image with copy.Image as a linux/ARCH machine pulls it (a list: that instance, alone)")
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
	if *arch != "" {
		out.Allowed, out.Digest, err = copied(context.Background(), sys, policy, ref, *arch)
	} else {
		out.Allowed, err = allowed(context.Background(), sys, policy, ref)
	}
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

// copied copies the image with copy.Image, as a linux/arch machine pulls it, into a temporary dir:
// whether the policy let it, and the digest of the manifest copied.
func copied(ctx context.Context, sys *types.SystemContext, policy *signature.Policy, ref types.ImageReference, arch string) (bool, string, error) {
	pc, err := signature.NewPolicyContext(policy)
	if err != nil {
		return false, "", err
	}
	defer func() { _ = pc.Destroy() }()
	dir, err := os.MkdirTemp("", "policycheck-copy-")
	if err != nil {
		return false, "", err
	}
	defer os.RemoveAll(dir)
	dest, err := directory.NewReference(dir)
	if err != nil {
		return false, "", err
	}
	source := *sys
	source.ArchitectureChoice, source.OSChoice = arch, "linux"
	copiedManifest, err := copy.Image(ctx, pc, dest, ref, &copy.Options{SourceCtx: &source, ReportWriter: io.Discard})
	if err != nil {
		return false, "", err
	}
	d, err := manifest.Digest(copiedManifest)
	if err != nil {
		return false, "", err
	}
	return true, d.String(), nil
}
