#!/usr/bin/env bash
# demo.sh (make demo): brings up a 2-node antrea-lab on a real Kubernetes
# control plane, runs 4 pods that kube-scheduler spreads over both nodes, and
# shows pod-to-pod connectivity across nodes (TCP and UDP) with the test pod
# program's client. The lab stays up at the end so you can explore it
# (export KUBECONFIG=_output/lab/kubeconfig); DEMO_KEEP=0 tears it down.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
export KUBECONFIG=$ROOT/_output/lab/kubeconfig
LAB=$ROOT/bin/antrea-lab
NS=demo
DEMO_KEEP=${DEMO_KEEP:-1}

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "make demo creates network namespaces: run it as root" >&2
  exit 1
fi

step "1/7 Tearing down a lab left over from an earlier run (if any)"
"$LAB" down

step "2/7 Bringing up a 2-node lab: etcd, kube-apiserver, kube-controller-manager, kube-scheduler + 2 simulated nodes"
start=$(date +%s%N)
"$LAB" up --nodes 2
end=$(date +%s%N)
echo "antrea-lab up returned after $(( (end - start) / 1000000 )) ms"

step "3/7 kubectl get nodes -o wide"
kubectl get nodes -o wide

step "4/7 Creating namespace $NS and a Deployment of 4 pods, spread over both nodes by kube-scheduler"
kubectl create namespace "$NS"
kubectl apply -n "$NS" -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      # One pod per node before a second one anywhere: both nodes get two.
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: web}
      containers:
      - name: web
        image: antrea-testpod   # no images here: every container runs antrea-testpod serve
        ports:
        - {containerPort: 80, protocol: TCP}
        - {containerPort: 80, protocol: UDP}
YAML

step "5/7 Waiting for the 4 pods to be Ready"
kubectl -n "$NS" rollout status deployment/web --timeout=120s
kubectl -n "$NS" wait --for=condition=Ready pod -l app=web --timeout=60s
kubectl -n "$NS" get pods -o wide

mapfile -t pods < <(kubectl -n "$NS" get pods -l app=web -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
declare -A ip node
for p in "${pods[@]}"; do
  ip[$p]=$(kubectl -n "$NS" get pod "$p" -o jsonpath='{.status.podIP}')
  node[$p]=$(kubectl -n "$NS" get pod "$p" -o jsonpath='{.spec.nodeName}')
done
nodes_used=$(printf '%s\n' "${node[@]}" | sort -u | wc -l)
echo "pods run on $nodes_used nodes"
if [ "$nodes_used" -lt 2 ]; then
  echo "expected the pods on both nodes" >&2
  exit 1
fi

step "6/7 Connectivity matrix: antrea-lab exec -n $NS SRC -- antrea-testpod connect --protocol P --to DST:80 --timeout 2s"
failures=0
for proto in tcp udp; do
  echo
  printf '%-6s %-28s' "$proto" "from \\ to"
  for d in "${pods[@]}"; do printf ' %-22s' "${d##*-}@${node[$d]}"; done
  echo
  for s in "${pods[@]}"; do
    printf '%-6s %-28s' "" "${s##*-}@${node[$s]} (${ip[$s]})"
    for d in "${pods[@]}"; do
      if out=$("$LAB" exec -n "$NS" "$s" -- antrea-testpod connect --protocol "$proto" --to "${ip[$d]}:80" --timeout 2s 2>&1); then
        answered=${out#connected }
        printf ' %-22s' "ok(${answered##*-})"
      else
        printf ' %-22s' "FAIL:${out%% *}"
        failures=$((failures + 1))
      fi
    done
    echo
  done
done
echo
echo "ok(X) = connected and pod ...-X answered; FAIL:verdict = refused or timeout"
if [ "$failures" -ne 0 ]; then
  echo "$failures probes failed" >&2
  exit 1
fi
echo "every pod reaches every pod over TCP and UDP, within and across nodes"

step "7/7 The lab"
"$LAB" status
if [ "$DEMO_KEEP" = "0" ]; then
  step "Tearing the lab down (DEMO_KEEP=0)"
  "$LAB" down
else
  cat <<EOT

The lab is still up. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl get pods -A -o wide
  $LAB exec -n $NS ${pods[0]} -- ip addr
  $LAB logs nodesim --node 1
Tear it down with:  $LAB down   (or: make lab-down)
EOT
fi
