//go:build tools

// Package realapi pins the real kube-apiserver and etcd the tests build; it is never
// compiled into the product (which is Python).
package realapi

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
