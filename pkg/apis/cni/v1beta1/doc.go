// Package v1beta1 is the gRPC API between the antrea-cni shim and the agent's
// CNIServer. cni.proto is the source; cni.pb.go and cni_grpc.pb.go are
// generated from it by hack/codegen-proto.sh (make codegen).
package v1beta1
