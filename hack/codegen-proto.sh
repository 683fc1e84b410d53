#!/usr/bin/env bash
# codegen-proto.sh regenerates the Go code of the project's protobuf/gRPC APIs
# (the CNI API in pkg/apis/cni/v1beta1, the FlowExporter's in pkg/apis/flow/v1alpha1). protoc comes from the Debian
# package protobuf-compiler, protoc-gen-go and protoc-gen-go-grpc from
# _output/tools (both installed, at pinned versions, by hack/install.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/_output/tools
for t in protoc-gen-go protoc-gen-go-grpc; do
  [ -x "$TOOLS/$t" ] || { echo "missing $TOOLS/$t: run hack/install.sh tools" >&2; exit 1; }
done
command -v protoc >/dev/null || { echo "missing protoc: run hack/install.sh apt" >&2; exit 1; }
export PATH=$TOOLS:$PATH

for dir in pkg/apis/cni/v1beta1 pkg/apis/flow/v1alpha1; do
  (cd "$ROOT" && protoc --proto_path=. \
    --go_out=. --go_opt=module=antrea.io/antrea \
    --go-grpc_out=. --go-grpc_opt=module=antrea.io/antrea \
    "$dir"/*.proto)
done
echo "codegen-proto: ok"
