#!/usr/bin/env bash
# manifests.sh renders the Helm chart build/charts/antrea into the manifest
# users apply, build/yamls/antrea.yml (or the file named by $1): `helm template`
# with the chart's default values in namespace kube-system, under a header that
# says so; and the chart build/charts/flow-aggregator into
# build/yamls/flow-aggregator.yml (or $2; not rendered when only $1 is given),
# in namespace flow-aggregator, which it creates as upstream's manifest does;
# and the web UI's objects alone (ui.enable=true, templates/ui) into
# build/yamls/antrea-ui.yml (or $3), applied after antrea.yml (`antrea-lab up --ui`).
# `make manifests` runs it; test/manifest fails when a committed file differs
# from its output.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELM=${HELM:-$ROOT/_output/tools/helm}
out=${1:-$ROOT/build/yamls/antrea.yml}
fa_out=${2:-}
ui_out=${3:-}
if [ $# -eq 0 ]; then
  fa_out=$ROOT/build/yamls/flow-aggregator.yml
  ui_out=$ROOT/build/yamls/antrea-ui.yml
fi
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

if [ -n "$fa_out" ]; then
  fa_tmp=$(mktemp "$fa_out.XXXXXX")
  trap 'rm -f "$tmp" "$fa_tmp"' EXIT
  {
    cat <<'HEADER'
# The Flow Aggregator: every object `kubectl apply -f flow-aggregator.yml` creates.
# Generated from the Helm chart build/charts/flow-aggregator by `make manifests`
# (hack/manifests.sh: helm template flow-aggregator build/charts/flow-aggregator --namespace flow-aggregator,
# after the Namespace). Do not edit: change the chart (or its values) and run `make manifests`.
# The agents send to it with featureGates.FlowExporter and flowExporter.enable on and
# flowExporter.flowCollectorAddr "flow-aggregator/flow-aggregator:4739:tcp" (docs/flow-export.md).
---
apiVersion: v1
kind: Namespace
metadata:
  name: flow-aggregator
  labels:
    app: flow-aggregator
HEADER
    "$HELM" template flow-aggregator "$ROOT/build/charts/flow-aggregator" --namespace flow-aggregator
  } >"$fa_tmp"
  chmod 0644 "$fa_tmp"
  mv "$fa_tmp" "$fa_out"
fi

if [ -n "$ui_out" ]; then
  ui_tmp=$(mktemp "$ui_out.XXXXXX")
  trap 'rm -f "$tmp" "${fa_tmp:-}" "$ui_tmp"' EXIT
  {
    cat <<'HEADER'
# The Antrea web UI (docs/ui.md): `kubectl apply -f antrea-ui.yml` after antrea.yml.
# Generated from the Helm chart build/charts/antrea by `make manifests`
# (hack/manifests.sh: helm template antrea build/charts/antrea --namespace kube-system
# --set ui.enable=true, the templates of ui/ only). Do not edit: change the chart and run `make manifests`.
HEADER
    "$HELM" template antrea "$ROOT/build/charts/antrea" --namespace kube-system --set ui.enable=true \
      --show-only templates/ui/rbac.yaml --show-only templates/ui/deployment.yaml
  } >"$ui_tmp"
  chmod 0644 "$ui_tmp"
  mv "$ui_tmp" "$ui_out"
fi
