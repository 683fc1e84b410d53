#!/usr/bin/env bash
# modes.sh: one TCP stream (iperf3) from a pod on node-1 to a pod on node-2,
# directly and through a ClusterIP, in each traffic mode, side by side in one
# run with the reference measured in the same run (two namespaces on a
# NORMAL-only userspace OVS, lib/normal-ovs.bash). Each mode gets a lab of
# two real nodes of its own (antrea-lab up ...), brought down after.
#   MODES  the modes, space-separated (default: geneve vxlan gre noEncap
#          networkPolicyOnly; a tunnel type is encap with that tunnel)
#   SECS   seconds per stream (default 5)
# Needs root, a built tree (make build) and no lab running. Traffic stays
# inside the lab's and this script's network namespaces.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB=$ROOT/bin/antrea-lab
export KUBECONFIG=$ROOT/_output/lab/kubeconfig PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
SECS=${SECS:-5}
MODES=${MODES:-geneve vxlan gre noEncap networkPolicyOnly}
PREFIX=modesref-$$
trap '"$LAB" down >/dev/null 2>&1 || true' EXIT
source "$ROOT/hack/bench/lib/normal-ovs.bash"

ref=$(normal_ovs_mbits "$SECS")
declare -A pod svc up
for m in $MODES; do
  case $m in
    geneve|vxlan|gre) flags=(--encap "$m") ;;
    *) flags=(--traffic-mode "$m") ;;
  esac
  "$LAB" down >/dev/null 2>&1 || true
  start=$(date +%s.%N)
  "$LAB" up --nodes 2 "${flags[@]}" >/dev/null
  up[$m]=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')
  kubectl create namespace bench >/dev/null
  until kubectl -n bench get sa default >/dev/null 2>&1; do sleep 0.2; done
  kubectl -n bench apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: client}
spec: {nodeName: node-1, containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [pause]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: server}}
spec: {nodeName: node-2, containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [pause]}]}
---
apiVersion: v1
kind: Service
metadata: {name: server}
spec: {selector: {app: server}, ports: [{port: 5201, protocol: TCP}]}
YAML
  kubectl -n bench wait --for=condition=Ready pod/client pod/server --timeout=120s >/dev/null
  server_ip=$(kubectl -n bench get pod server -o jsonpath='{.status.podIP}')
  cluster_ip=$(kubectl -n bench get svc server -o jsonpath='{.spec.clusterIP}')
  # The host's iperf3 in the pods' network namespaces (antrea-lab exec):
  # the agnhost image has none. One server per stream (-1).
  stream() {
    "$LAB" exec -n bench server -- iperf3 -s -1 >/dev/null 2>&1 &
    local srv=$!
    local got=""
    sleep 1 # the server listening
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      if got=$("$LAB" exec -n bench client -- iperf3 -c "$1" -t "$SECS" -J 2>/dev/null | mbits 2>/dev/null); then break; fi
      sleep 1
    done
    wait "$srv" 2>/dev/null || true
    echo "${got:-failed}"
  }
  pod[$m]=$(stream "$server_ip")
  svc[$m]=$(stream "$cluster_ip")
done

ratio() { awk -v a="$1" -v b="$ref" 'BEGIN{ if (a+0 > 0) printf "%.2fx", a/b; else print "-" }'; }
printf 'one TCP stream, iperf3 %ss, pod on node-1 -> pod on node-2 (Mbit/s; ratio to the reference)\n' "$SECS"
printf '%-44s %10s\n' "reference: OVS netdev, NORMAL flow only" "$ref"
printf '%-20s %12s %8s %12s %8s %8s\n' mode pod-to-pod ratio via-ClusterIP ratio "lab up"
for m in $MODES; do
  printf '%-20s %12s %8s %12s %8s %7ss\n' "$m" "${pod[$m]}" "$(ratio "${pod[$m]}")" "${svc[$m]}" "$(ratio "${svc[$m]}")" "${up[$m]}"
done
