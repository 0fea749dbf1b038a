//go:build tools

// Package main pins the Kubernetes commands build.sh builds, so that go.mod and go.sum keep them.
package main

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)
