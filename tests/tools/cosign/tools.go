//go:build tools

// Package cosign pins sigstore's real `cosign` CLI that the signing tests
// (tests/realtools/test_signing.py) sign our images with; it is never compiled into the product
// (which is Python).
package cosign

import (
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)
