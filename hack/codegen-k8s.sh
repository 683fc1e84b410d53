#!/usr/bin/env bash
# codegen-k8s.sh regenerates the Kubernetes API machinery of pkg/apis/controlplane,
# pkg/apis/crd and pkg/apis/stats: deepcopy and conversion functions, the typed clientset,
# listers and informers under pkg/client, the OpenAPI models of the aggregated
# API, and the CRD manifests of crd.antrea.io (build/charts/antrea/crds, from the
# types' +kubebuilder markers). Generators are k8s.io/code-generator at the
# version go.mod pins and controller-gen at CONTROLLER_GEN_VERSION, built into
# _output/tools on first use.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TOOLS=$ROOT/_output/tools
HEADER=$ROOT/hack/boilerplate.go.txt
MODULE=antrea.io/antrea
GENS=(deepcopy-gen conversion-gen client-gen lister-gen informer-gen)
CONTROLLER_GEN_VERSION=v0.23.0

mkdir -p "$TOOLS"
for g in "${GENS[@]}"; do
  if [ ! -x "$TOOLS/$g" ]; then
    GOBIN=$TOOLS go install "k8s.io/code-generator/cmd/$g"
  fi
done

# Remove what a generator wrote before, so that deleted types leave nothing behind.
find pkg/apis/controlplane pkg/apis/crd pkg/apis/stats -name 'zz_generated.*.go' -delete
rm -rf pkg/client/clientset pkg/client/listers pkg/client/informers

echo "[codegen-k8s] deepcopy"
"$TOOLS/deepcopy-gen" --go-header-file "$HEADER" --output-file zz_generated.deepcopy.go \
  ./pkg/apis/controlplane ./pkg/apis/controlplane/v1beta2 ./pkg/apis/crd/v1alpha1 ./pkg/apis/crd/v1alpha2 ./pkg/apis/crd/v1beta1 ./pkg/apis/stats/v1alpha1

echo "[codegen-k8s] conversion"
"$TOOLS/conversion-gen" --go-header-file "$HEADER" --output-file zz_generated.conversion.go \
  ./pkg/apis/controlplane/v1beta2

echo "[codegen-k8s] clientset"
"$TOOLS/client-gen" --go-header-file "$HEADER" \
  --clientset-name versioned \
  --input-base "$MODULE/pkg/apis" --input controlplane/v1beta2 --input crd/v1alpha1 --input crd/v1alpha2 --input crd/v1beta1 --input stats/v1alpha1 \
  --output-dir pkg/client/clientset --output-pkg "$MODULE/pkg/client/clientset"

echo "[codegen-k8s] listers"
"$TOOLS/lister-gen" --go-header-file "$HEADER" \
  --output-dir pkg/client/listers --output-pkg "$MODULE/pkg/client/listers" \
  "$MODULE/pkg/apis/controlplane/v1beta2" "$MODULE/pkg/apis/crd/v1alpha1" "$MODULE/pkg/apis/crd/v1alpha2" "$MODULE/pkg/apis/crd/v1beta1"

echo "[codegen-k8s] informers"
"$TOOLS/informer-gen" --go-header-file "$HEADER" \
  --versioned-clientset-package "$MODULE/pkg/client/clientset/versioned" \
  --listers-package "$MODULE/pkg/client/listers" \
  --output-dir pkg/client/informers --output-pkg "$MODULE/pkg/client/informers" \
  "$MODULE/pkg/apis/controlplane/v1beta2" "$MODULE/pkg/apis/crd/v1alpha1" "$MODULE/pkg/apis/crd/v1alpha2" "$MODULE/pkg/apis/crd/v1beta1"

# OpenAPI definitions: k8s.io/apiserver needs them to install a group (server-
# side apply type models), and kubectl explain reads them. The model names
# (OpenAPIModelName, from +k8s:openapi-model-package) must be what the scheme
# names the types, or the type converter finds no type for a kind. API-rule
# violations are reported to a file rather than failing the run.
echo "[codegen-k8s] openapi"
if [ ! -x "$TOOLS/openapi-gen" ]; then
  GOBIN=$TOOLS go install k8s.io/kube-openapi/cmd/openapi-gen
fi
rm -f pkg/apiserver/openapi/zz_generated.openapi.go
"$TOOLS/openapi-gen" --go-header-file "$HEADER" \
  --output-file zz_generated.openapi.go \
  --output-dir pkg/apiserver/openapi --output-pkg "$MODULE/pkg/apiserver/openapi" \
  --report-filename "$ROOT/_output/openapi-violations.report" \
  --output-model-name-file zz_generated.model_name.go \
  --readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 --readonly-pkg k8s.io/apimachinery/pkg/runtime \
  --readonly-pkg k8s.io/apimachinery/pkg/version --readonly-pkg k8s.io/apimachinery/pkg/util/intstr \
  k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version \
  k8s.io/apimachinery/pkg/util/intstr \
  "$MODULE/pkg/apis/controlplane/v1beta2" "$MODULE/pkg/apis/stats/v1alpha1"

# The CRDs of crd.antrea.io, from the types and their +kubebuilder markers
# (schemas, CEL rules, printer columns, short names, status subresource).
# allowDangerousTypes: priority is a float64, as upstream's. The chart installs
# them from build/charts/antrea/crds (hack/manifests.sh renders them with
# --include-crds).
echo "[codegen-k8s] crds"
if [ ! -x "$TOOLS/controller-gen" ] || ! "$TOOLS/controller-gen" --version | grep -q "$CONTROLLER_GEN_VERSION"; then
  (cd / && GOBIN=$TOOLS go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION")
fi
rm -f build/charts/antrea/crds/crd.antrea.io_*.yaml
"$TOOLS/controller-gen" crd:allowDangerousTypes=true paths=./pkg/apis/crd/v1alpha1 paths=./pkg/apis/crd/v1alpha2 paths=./pkg/apis/crd/v1beta1 \
  output:crd:dir=build/charts/antrea/crds
