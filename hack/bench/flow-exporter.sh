#!/usr/bin/env bash
# flow-exporter.sh [SECONDS] [COUNTS...]: the FlowExporter's cost on a running
# lab (antrea-lab up --flow-visibility): the CPU time (user + system, from
# /proc/PID/stat) each antrea-agent uses over SECONDS (default 60) and its RSS
# (VmRSS), while a Pod on node-1 holds N idle TCP connections to a Pod on
# node-2 (antrea-testpod hold), for each N of COUNTS (default 0 1000 10000);
# then while it attempts FLOOD_RATE (default 1000; 0: none) connections a
# second that an ACNP drops (antrea-testpod flood).
# The agents first get the FlowExporter's default timings (flowPollInterval
# 5s, activeFlowExportTimeout 5s, idleFlowExportTimeout 15s; the lab's are
# 1s/2s/5s) and are restarted; TIMINGS=lab keeps the lab's. The figures of
# docs/flow-export.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export KUBECONFIG=${KUBECONFIG:-$ROOT/_output/lab/kubeconfig}
d=${1:-60}
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(0 1000 10000)
ns=flow-bench
image=docker.io/antrea/antrea-testpod:latest
tick=$(getconf CLK_TCK)

agent_pid() { # agent_pid NODE: the antrea-agent process in the node's netns
  for p in $(ps -eo pid=,args= | awk '$2 == "antrea-agent" && $3 == "--config" {print $1}'); do
    if [ "$(ip netns identify "$p" 2>/dev/null)" = "antrea-lab-$1" ]; then echo "$p"; return; fi
  done
  echo "no antrea-agent in antrea-lab-$1" >&2; return 1
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
conntrack() { # conntrack NODE: entries of br-int's zone in the node's OVS
  kubectl -n kube-system exec "$(kubectl -n kube-system get pod -l app=antrea,component=antrea-agent \
    --field-selector spec.nodeName="$1" -o name)" -c antrea-ovs -- \
    ovs-appctl dpctl/dump-conntrack netdev@ovs-netdev zone=65520 | wc -l
}

if [ "${TIMINGS:-default}" = default ]; then
  kubectl -n kube-system get configmap antrea-config -o json | python3 -c '
import json, re, sys
cm = json.load(sys.stdin)
conf = cm["data"]["antrea-agent.conf"]
for k, v in (("flowPollInterval", "5s"), ("activeFlowExportTimeout", "5s"), ("idleFlowExportTimeout", "15s")):
    conf = re.sub(r"(?m)^(\s*)%s:.*$" % k, lambda m: "%s%s: \"%s\"" % (m.group(1), k, v), conf)
cm["data"]["antrea-agent.conf"] = conf
json.dump(cm, sys.stdout)' | kubectl apply -f - >/dev/null
  kubectl -n kube-system rollout restart ds/antrea-agent >/dev/null
  kubectl -n kube-system rollout status ds/antrea-agent --timeout=300s >/dev/null
  sleep 20
fi
kubectl -n kube-system get configmap antrea-config -o jsonpath='{.data.antrea-agent\.conf}' | grep -E "flowPollInterval|activeFlowExportTimeout|idleFlowExportTimeout" | sed 's/^ */timing: /'

kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: holder, namespace: $ns, labels: {app: flow-bench}}
spec:
  nodeName: node-2
  containers:
  - {name: hold, image: $image, imagePullPolicy: IfNotPresent, command: [/antrea-testpod, hold, --listen, ":7000"]}
YAML
kubectl -n "$ns" wait --for=condition=Ready pod/holder --timeout=120s >/dev/null
server=$(kubectl -n "$ns" get pod holder -o jsonpath='{.status.podIP}')

for n in "${counts[@]}"; do
  kubectl -n "$ns" delete pod client --ignore-not-found --wait=true >/dev/null
  if [ "$n" -gt 0 ]; then
    cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: $ns}
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 5
  containers:
  - {name: hold, image: $image, imagePullPolicy: IfNotPresent,
     command: [/antrea-testpod, hold, --to, "$server:7000", --connections, "$n", --rate, "1000"]}
YAML
    for _ in $(seq 120); do
      kubectl -n "$ns" logs client 2>/dev/null | grep -q "holding $n" && break
      sleep 1
    done
    kubectl -n "$ns" logs client | grep -q "holding $n" || { echo "the client did not open $n connections" >&2; kubectl -n "$ns" logs client >&2; exit 1; }
  fi
  # Let the exporter reach its steady state (the first records sent).
  sleep 30
  declare -A before pid
  for node in node-1 node-2; do pid[$node]=$(agent_pid $node); before[$node]=$(cpu "${pid[$node]}"); done
  sleep "$d"
  for node in node-1 node-2; do
    after=$(cpu "${pid[$node]}")
    awk -v node="$node" -v n="$n" -v a="$after" -v b="${before[$node]}" -v t="$tick" -v d="$d" -v rss="$(rss "${pid[$node]}")" \
      -v ct="$(conntrack $node)" \
      'BEGIN {printf "%6d connections: %s antrea-agent: %.2f CPU-s in %ss (%.1f%% of a core), RSS %.0f MiB; conntrack entries %d\n", n, node, (a - b) / t, d, 100 * (a - b) / t / d, rss / 1024, ct}'
  done
done
kubectl -n "$ns" delete pod client --ignore-not-found --wait=true >/dev/null

# A flood of denied connections: an ACNP drops TCP 7001 into the holder, a Pod
# on node-1 attempts FLOOD_RATE connections a second (each from a new source
# port: a new denied connection) for SECONDS. node-2's agent gets at most the
# deny meter's 500 packet-ins a second and holds at most 4,096 denied
# connections; its CPU and the meter's counts say what that costs.
if [ "${FLOOD_RATE:-1000}" -gt 0 ]; then
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: flow-bench-drop}
spec:
  priority: 5
  tier: securityops
  appliedTo:
  - podSelector: {matchLabels: {app: flow-bench}}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $ns}}
  ingress:
  - {name: drop-7001, action: Drop, ports: [{protocol: TCP, port: 7001}]}
YAML
  for _ in $(seq 60); do
    [ "$(kubectl get clusternetworkpolicy flow-bench-drop -o jsonpath='{.status.phase}')" = Realized ] && break
    sleep 1
  done
  ovs2=$(kubectl -n kube-system get pod -l app=antrea,component=antrea-agent --field-selector spec.nodeName=node-2 -o name)
  meter() { kubectl -n kube-system exec "$ovs2" -c antrea-ovs -- ovs-ofctl -O OpenFlow15 meter-stats br-int meter=5 | tr ' ' '\n'; }
  in0=$(meter | awk -F: '/^packet_in_count/ {print $2}'); drop0=$(meter | awk -F: '/^packet_count/ {print $2; exit}')
  p2=$(agent_pid node-2); c0=$(cpu "$p2")
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: flooder, namespace: $ns}
spec:
  nodeName: node-1
  restartPolicy: Never
  containers:
  - {name: flood, image: $image, imagePullPolicy: IfNotPresent,
     command: [/antrea-testpod, flood, --to, "$server:7001", --rate, "${FLOOD_RATE:-1000}", --for, "${d}s", --timeout, 1s]}
YAML
  for _ in $(seq $((d + 120))); do
    phase=$(kubectl -n "$ns" get pod flooder -o jsonpath='{.status.phase}' 2>/dev/null)
    [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
    sleep 1
  done
  c1=$(cpu "$p2")
  in1=$(meter | awk -F: '/^packet_in_count/ {print $2}'); drop1=$(meter | awk -F: '/^packet_count/ {print $2; exit}')
  echo "denied flood: $(kubectl -n "$ns" logs flooder) at ${FLOOD_RATE:-1000}/s for ${d}s"
  awk -v a="$c1" -v b="$c0" -v t="$tick" -v d="$d" -v i="$((in1 - in0))" -v x="$((drop1 - drop0))" -v rss="$(rss "$p2")" \
    'BEGIN {printf "denied flood: node-2 antrea-agent: %.2f CPU-s (%.1f%% of a core), RSS %.0f MiB; deny meter: %d packets in, %d dropped by its band, %d sent to the agent\n", (a - b) / t, 100 * (a - b) / t / d, rss / 1024, i, x, i - x}'
  kubectl delete clusternetworkpolicy flow-bench-drop >/dev/null
fi
kubectl delete namespace "$ns" --wait=false >/dev/null
