//go:build tools

// Package realapi pins the real kube-apiserver, etcd and the node's parts (kubelet,
// kube-controller-manager, kube-scheduler) the tests build, all of one Kubernetes release; it is
// never compiled into the product (which is Python).
package realapi

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
