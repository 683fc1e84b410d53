#!/usr/bin/env bash
# throughput.sh: pod-to-pod TCP throughput (iperf3, 5 s) through Antrea on the
# lab, same node and across nodes, next to the reference measured in the same
# run: two network namespaces on one userspace OVS bridge with only the NORMAL
# flow (what OVS does with no pipeline at all). Prints Mbit/s and the ratios.
# Needs root, a built tree (make build) and no lab running (it brings one up
# and down). Traffic stays inside network namespaces this script creates.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB=$ROOT/bin/antrea-lab
export KUBECONFIG=$ROOT/_output/lab/kubeconfig PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
SECS=${SECS:-5}
PREFIX=tputref-$$
cleanup() {
  "$LAB" down >/dev/null 2>&1 || true
}
trap cleanup EXIT

source "$ROOT/hack/bench/lib/normal-ovs.bash"
ref=$(normal_ovs_mbits "$SECS")

# Antrea on the lab.
"$LAB" down >/dev/null 2>&1 || true
# Host iperf3 processes as pods: the node simulator runs them (real nodes run
# images only); the datapath measured is the same.
"$LAB" up --nodes 2 --runtime antrea --kubelet sim >/dev/null
kubectl create namespace tput >/dev/null
until kubectl -n tput get sa default >/dev/null 2>&1; do sleep 0.2; done
kubectl -n tput apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: client}
spec: {nodeName: node-1, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: same}
spec: {nodeName: node-1, containers: [{name: c, image: iperf3, command: [iperf3, -s]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: remote}
spec: {nodeName: node-2, containers: [{name: c, image: iperf3, command: [iperf3, -s]}]}
YAML
kubectl -n tput wait --for=condition=Ready pod/client pod/same pod/remote --timeout=60s >/dev/null
ip_of() { kubectl -n tput get pod "$1" -o jsonpath='{.status.podIP}'; }
run() { "$LAB" exec -n tput client -- iperf3 -c "$1" -t "$SECS" -J | mbits; }
same=$(run "$(ip_of same)")
remote=$(run "$(ip_of remote)")
encap=$(jq -r .options.encap "$ROOT/_output/lab/state.json")

printf '%-44s %10s\n' "pod-to-pod TCP, iperf3 ${SECS}s" "Mbit/s"
printf '%-44s %10s\n' "reference: OVS netdev, NORMAL flow only" "$ref"
printf '%-44s %10s  %s\n' "Antrea, same node" "$same" "$(awk -v a="$same" -v b="$ref" 'BEGIN{printf "%.2fx the reference", a/b}')"
printf '%-44s %10s  %s\n' "Antrea, across nodes ($encap)" "$remote" "$(awk -v a="$remote" -v b="$ref" 'BEGIN{printf "%.2fx the reference", a/b}')"
