// Command etcd runs the etcd server from go.etcd.io/etcd/server/v3 for the tests' control plane.
// kube-apiserver, kube-controller-manager and kube-scheduler are built straight from
// k8s.io/kubernetes/cmd/... (see tools.go and build.sh); nothing of their source lives here.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
