// Command goptuna-suggestion serves Katib's Go suggestion service (github.com/kubeflow/katib
// pkg/suggestion/v1beta1/goptuna: random, tpe, cmaes, sobol) like Katib's own
// cmd/suggestion/goptuna/v1beta1, except that the listen address is a flag (default Katib's
// 0.0.0.0:6789), so that several suggestion "pods" can serve on one host, each on its pod IP.
package main

import (
	"context"
	"flag"
	"net"

	health_pb "github.com/kubeflow/katib/pkg/apis/manager/health"
	api_v1_beta1 "github.com/kubeflow/katib/pkg/apis/manager/v1beta1"
	suggestion "github.com/kubeflow/katib/pkg/suggestion/v1beta1/goptuna"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

type health struct{}

func (health) Check(context.Context, *health_pb.HealthCheckRequest) (*health_pb.HealthCheckResponse, error) {
	return &health_pb.HealthCheckResponse{Status: health_pb.HealthCheckResponse_SERVING}, nil
}

func main() {
	address := flag.String("listen", "0.0.0.0:6789", "address to serve the Suggestion and Health gRPC services on")
	flag.Parse()
	l, err := net.Listen("tcp", *address)
	if err != nil {
		klog.Fatalf("Failed to listen: %v", err)
	}
	srv := grpc.NewServer()
	api_v1_beta1.RegisterSuggestionServer(srv, suggestion.NewSuggestionService())
	health_pb.RegisterHealthServer(srv, health{})
	klog.Infof("goptuna suggestion service listening on %s", *address)
	if err := srv.Serve(l); err != nil {
		klog.Fatalf("Failed to serve: %v", err)
	}
}
