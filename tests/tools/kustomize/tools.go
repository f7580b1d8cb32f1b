//go:build tools

// Package kustomize pins the real `kustomize` CLI that the doc test (tests/realapi/test_admin_docs.py)
// runs for docs/admin.md's `kustomize create` and `kustomize edit set image`; it is never compiled
// into the product (which is Python).
package kustomize

import (
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
