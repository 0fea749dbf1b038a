// The tests' cluster DNS: CoreDNS (github.com/coredns/coredns, pinned in go.mod) with only the
// plugins the test cluster's Corefile uses, as CoreDNS documents for a custom build: the directive
// order is CoreDNS' own (core/dnsserver/zdirectives.go), shortened to these plugins. Built by
// ../build.sh; run by tests/cluster/dns.py.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "hosts", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
