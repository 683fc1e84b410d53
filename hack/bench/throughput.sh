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
DIR=$(mktemp -d /tmp/tputref-XXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$PREFIX-a" 2>/dev/null || true
  ip netns del "$PREFIX-b" 2>/dev/null || true
  ip netns del "$PREFIX-sw" 2>/dev/null || true
  rm -rf "$DIR"
  "$LAB" down >/dev/null 2>&1 || true
}
trap cleanup EXIT

mbits() { jq -r '.end.sum_received.bits_per_second / 1e6 | floor'; }

# Reference: NORMAL-only OVS (netdev) between two namespaces.
export OVS_RUNDIR=$DIR OVS_DBDIR=$DIR OVS_LOGDIR=$DIR OVS_SYSCONFDIR=$DIR
ip netns add "$PREFIX-sw"; ip netns add "$PREFIX-a"; ip netns add "$PREFIX-b"
ovsdb-tool create "$DIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$DIR/conf.db" --remote="punix:$DIR/db.sock" --pidfile="$DIR/db.pid" --unixctl="$DIR/db.ctl" >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
ip netns exec "$PREFIX-sw" ovs-vswitchd "unix:$DIR/db.sock" --pidfile="$DIR/vs.pid" --unixctl="$DIR/vs.ctl" >/dev/null 2>&1 &
PIDS+=($!)
ovs-vsctl --db="unix:$DIR/db.sock" --timeout=10 add-br br0 -- set bridge br0 datapath_type=netdev
i=0
for n in a b; do
  i=$((i + 1))
  ip -n "$PREFIX-$n" link add eth0 type veth peer name "v$n" netns "$PREFIX-sw"
  ip -n "$PREFIX-$n" addr add "192.168.250.$i/24" dev eth0
  ip -n "$PREFIX-$n" link set eth0 up
  ip netns exec "$PREFIX-$n" ethtool -K eth0 tx off >/dev/null
  ip -n "$PREFIX-sw" link set "v$n" up
  ovs-vsctl --db="unix:$DIR/db.sock" --timeout=10 add-port br0 "v$n"
done
ip netns exec "$PREFIX-b" iperf3 -s -1 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
ref=$(ip netns exec "$PREFIX-a" iperf3 -c 192.168.250.2 -t "$SECS" -J | mbits)
unset OVS_RUNDIR OVS_DBDIR OVS_LOGDIR OVS_SYSCONFDIR

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
