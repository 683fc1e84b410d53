#!/usr/bin/env bash
# codegen-k8s.sh regenerates the Kubernetes API machinery of pkg/apis/controlplane:
# deepcopy and conversion functions, and the typed clientset, listers and
# informers under pkg/client. Generators are k8s.io/code-generator at the version
# go.mod pins, built into _output/tools on first use.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TOOLS=$ROOT/_output/tools
HEADER=$ROOT/hack/boilerplate.go.txt
MODULE=antrea.io/antrea
GENS=(deepcopy-gen conversion-gen client-gen lister-gen informer-gen)

mkdir -p "$TOOLS"
for g in "${GENS[@]}"; do
  if [ ! -x "$TOOLS/$g" ]; then
    GOBIN=$TOOLS go install "k8s.io/code-generator/cmd/$g"
  fi
done

# Remove what a generator wrote before, so that deleted types leave nothing behind.
find pkg/apis/controlplane -name 'zz_generated.*.go' -delete
rm -rf pkg/client/clientset pkg/client/listers pkg/client/informers

echo "[codegen-k8s] deepcopy"
"$TOOLS/deepcopy-gen" --go-header-file "$HEADER" --output-file zz_generated.deepcopy.go \
  ./pkg/apis/controlplane ./pkg/apis/controlplane/v1beta2

echo "[codegen-k8s] conversion"
"$TOOLS/conversion-gen" --go-header-file "$HEADER" --output-file zz_generated.conversion.go \
  ./pkg/apis/controlplane/v1beta2

echo "[codegen-k8s] clientset"
"$TOOLS/client-gen" --go-header-file "$HEADER" \
  --clientset-name versioned \
  --input-base "$MODULE/pkg/apis" --input controlplane/v1beta2 \
  --output-dir pkg/client/clientset --output-pkg "$MODULE/pkg/client/clientset"

echo "[codegen-k8s] listers"
"$TOOLS/lister-gen" --go-header-file "$HEADER" \
  --output-dir pkg/client/listers --output-pkg "$MODULE/pkg/client/listers" \
  "$MODULE/pkg/apis/controlplane/v1beta2"

echo "[codegen-k8s] informers"
"$TOOLS/informer-gen" --go-header-file "$HEADER" \
  --versioned-clientset-package "$MODULE/pkg/client/clientset/versioned" \
  --listers-package "$MODULE/pkg/client/listers" \
  --output-dir pkg/client/informers --output-pkg "$MODULE/pkg/client/informers" \
  "$MODULE/pkg/apis/controlplane/v1beta2"
