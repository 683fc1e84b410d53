#!/usr/bin/env bash
# manifests.sh renders the Helm chart build/charts/antrea into the manifest
# users apply, build/yamls/antrea.yml (or the file named by $1): `helm template`
# with the chart's default values in namespace kube-system, under a header that
# says so. `make manifests` runs it; test/manifest fails when the committed file
# differs from its output.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELM=${HELM:-$ROOT/_output/tools/helm}
out=${1:-$ROOT/build/yamls/antrea.yml}
if [ ! -x "$HELM" ]; then
  echo "manifests.sh: no helm at $HELM: run make install (or ./hack/install.sh helm)" >&2
  exit 1
fi
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
  cat <<'HEADER'
# Antrea: every object `kubectl apply -f antrea.yml` creates to install it.
# Generated from the Helm chart build/charts/antrea by `make manifests`
# (hack/manifests.sh: helm template antrea build/charts/antrea --namespace kube-system --include-crds).
# Do not edit: change the chart (or its values) and run `make manifests`.
HEADER
  "$HELM" template antrea "$ROOT/build/charts/antrea" --namespace kube-system --include-crds
} >"$tmp"
chmod 0644 "$tmp"
mv "$tmp" "$out"
