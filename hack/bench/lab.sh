#!/usr/bin/env bash
# lab.sh: what a user of the lab waits for and pays, real nodes next to the
# node simulator measured in the same run: `antrea-lab up` to every node
# Ready, a 20-pod Deployment from `kubectl apply` to all pods Ready, and the
# lab's total RSS with 10 pods running. Each lab is torn down after use.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
export KUBECONFIG=$ROOT/_output/lab/kubeconfig
LAB=$ROOT/bin/antrea-lab
[ "$(id -u)" -eq 0 ] || { echo "lab.sh brings up labs: run it as root" >&2; exit 1; }
trap '"$LAB" down >/dev/null 2>&1 || true' EXIT

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# deployment NAME REPLICAS IMAGE ARGS EXTRA: applies a Deployment in namespace bench
# (EXTRA: one more pod spec line).
deployment() {
  kubectl -n bench apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      $5
      containers: [{name: c, image: $3, args: $4}]
YAML
}

# measure KUBELET IMAGE ARGS: prints "up_ms deploy20_ms rss10_mib".
measure() {
  local kubelet=$1 image=$2 args=$3 t up deploy rss
  "$LAB" down >/dev/null
  t=$(date +%s%N)
  "$LAB" up --nodes 2 --kubelet "$kubelet" >/dev/null
  up=$(ms "$t")
  kubectl create namespace bench >/dev/null
  until kubectl -n bench get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
  deployment ten 10 "$image" "$args" "terminationGracePeriodSeconds: 0"
  kubectl -n bench rollout status deployment/ten --timeout=300s >/dev/null
  rss=$("$LAB" status | sed -n 's/.*total RSS of the lab: \([0-9]*\) MiB.*/\1/p')
  kubectl -n bench delete deployment ten --wait=false >/dev/null
  t=$(date +%s%N)
  deployment twenty 20 "$image" "$args" ""
  kubectl -n bench rollout status deployment/twenty --timeout=300s >/dev/null
  deploy=$(ms "$t")
  "$LAB" down >/dev/null
  echo "$up $deploy $rss"
}

read -r up_real dep_real rss_real < <(measure real registry.k8s.io/e2e-test-images/agnhost:2.66.1 '[netexec, --http-port=8080]')
read -r up_sim dep_sim rss_sim < <(measure sim antrea-testpod '[]')
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-40s %12s %12s %8s\n' "lab (2 nodes, Antrea)" "real nodes" "simulator" "ratio"
printf '%-40s %9s ms %9s ms %8s\n' "up -> all nodes Ready" "$up_real" "$up_sim" "$(ratio "$up_real" "$up_sim")"
printf '%-40s %9s ms %9s ms %8s\n' "20-pod Deployment: apply -> all Ready" "$dep_real" "$dep_sim" "$(ratio "$dep_real" "$dep_sim")"
printf '%-40s %8s MiB %8s MiB %8s\n' "total RSS with 10 pods" "$rss_real" "$rss_sim" "$(ratio "$rss_real" "$rss_sim")"
echo "(real: agnhost netexec containers under kubelet + containerd; simulator: antrea-testpod host processes; kind takes 30-60 s to Ready on a laptop)"
