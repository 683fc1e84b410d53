#!/usr/bin/env bash
# modes.sh: one TCP stream (iperf3) and TCP connections per second (4
# clients for 3 s, hack/bench/cps) from a pod on node-1 to a pod on node-2,
# directly and through a ClusterIP, in each traffic mode, side by side in one
# run with the reference measured in the same run (two namespaces on a
# NORMAL-only userspace OVS, lib/normal-ovs.bash). Each mode gets a lab of
# two real nodes of its own (antrea-lab up ...), brought down after.
#   MODES  the modes, space-separated (default: geneve vxlan gre noEncap
#          hybrid networkPolicyOnly; a tunnel type is encap with that
#          tunnel; hybrid puts the two nodes in two subnets joined by a
#          router, the path it tunnels; ipv6 is an IPv6-only lab, Geneve
#          over the IPv6 underlay: MODES="geneve ipv6" sets it beside IPv4)
#   SECS   seconds per stream (default 5)
# Needs root, a built tree (make build) and no lab running. Traffic stays
# inside the lab's and this script's network namespaces.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB=$ROOT/bin/antrea-lab
export KUBECONFIG=$ROOT/_output/lab/kubeconfig PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
SECS=${SECS:-5}
MODES=${MODES:-geneve vxlan gre noEncap hybrid networkPolicyOnly}
PREFIX=modesref-$$
trap '"$LAB" down >/dev/null 2>&1 || true' EXIT
source "$ROOT/hack/bench/lib/normal-ovs.bash"
CPS=$ROOT/_output/tools/cps
(cd "$ROOT" && go build -o "$CPS" ./hack/bench/cps)

# hostport is HOST:PORT, an IPv6 HOST in brackets.
hostport() { case $1 in *:*) echo "[$1]:$2" ;; *) echo "$1:$2" ;; esac; }

read -r ref refcps < <(normal_ovs_mbits_cps "$SECS" "$CPS")
declare -A pod svc podcps svccps up
for m in $MODES; do
  case $m in
    geneve|vxlan|gre) flags=(--encap "$m") ;;
    # node-1 and node-2 in two subnets: the path hybrid tunnels (within a
    # subnet hybrid routes as noEncap does).
    hybrid) flags=(--traffic-mode hybrid --subnets 2) ;;
    # An IPv6-only cluster: pods, Services and the tunnel's underlay IPv6.
    ipv6) flags=(--ip-family ipv6) ;;
    *) flags=(--traffic-mode "$m") ;;
  esac
  "$LAB" down >/dev/null 2>&1 || true
  start=$(date +%s.%N)
  if ! "$LAB" up --nodes 2 "${flags[@]}" >/dev/null; then
    # Keep going with the other modes; this one's row says failed.
    echo "modes.sh: lab up ${flags[*]} failed; the supervisor's log ends:" >&2
    tail -20 "$ROOT/_output/lab/logs/supervisor.log" >&2 || true
    pod[$m]=failed svc[$m]=failed podcps[$m]=failed svccps[$m]=failed up[$m]=-
    continue
  fi
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
spec: {selector: {app: server}, ports: [{name: iperf, port: 5201, protocol: TCP}, {name: cps, port: 8080, protocol: TCP}]}
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
  # Connections a second: the cps server in the server pod's netns, bounded
  # in time, dialled straight and through the ClusterIP.
  "$LAB" exec -n bench server -- "$CPS" serve :8080 -for 60s >/dev/null 2>&1 &
  cps_srv=$!
  sleep 1
  podcps[$m]=$("$LAB" exec -n bench client -- "$CPS" dial "$(hostport "$server_ip" 8080)" 2>/dev/null || echo failed)
  svccps[$m]=$("$LAB" exec -n bench client -- "$CPS" dial "$(hostport "$cluster_ip" 8080)" 2>/dev/null || echo failed)
  kill "$cps_srv" 2>/dev/null || true
  wait "$cps_srv" 2>/dev/null || true
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0) printf "%.2fx", a/b; else print "-" }'; }
printf 'pod on node-1 -> pod on node-2: one TCP stream (iperf3 %ss, Mbit/s) and TCP connections a second (4 clients, 3 s);\n' "$SECS"
printf 'each with its ratio to the reference, measured in this run\n'
printf '%-40s %10s %10s\n' "reference: OVS netdev, NORMAL flow only" "$ref" "$refcps"
printf '%-20s %10s %7s %10s %7s %10s %7s %10s %7s %8s\n' mode pod-Mbit/s ratio svc-Mbit/s ratio pod-conn/s ratio svc-conn/s ratio "lab up"
for m in $MODES; do
  printf '%-20s %10s %7s %10s %7s %10s %7s %10s %7s %7ss\n' "$m" "${pod[$m]}" "$(ratio "${pod[$m]}" "$ref")" "${svc[$m]}" "$(ratio "${svc[$m]}" "$ref")" \
    "${podcps[$m]}" "$(ratio "${podcps[$m]}" "$refcps")" "${svccps[$m]}" "$(ratio "${svccps[$m]}" "$refcps")" "${up[$m]}"
done
