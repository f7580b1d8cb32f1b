//go:build tools

// Package argocd pins the real Argo CD whose `argocd` CLI the health-check tests run; it is never
// compiled into the product (which is Python).
package argocd

import (
	_ "github.com/argoproj/argo-cd/v2/cmd"
)
