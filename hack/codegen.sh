#!/usr/bin/env bash
# codegen.sh regenerates every generated file: the CNI and flow gRPC APIs from their .proto
# (hack/codegen-proto.sh) and the Kubernetes API machinery for pkg/apis
# (hack/codegen-k8s.sh). Tools come from hack/install.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$ROOT/_output/tools:$ROOT/_output/bin:$PATH
for s in "$ROOT"/hack/codegen-proto.sh "$ROOT"/hack/codegen-k8s.sh; do
  [ -x "$s" ] && "$s"
done
