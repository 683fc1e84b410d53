#!/usr/bin/env bash
# demo.sh (make demo): brings up a 2-node antrea-lab: a real Kubernetes
# control plane and real nodes (kubelet + containerd + runc), onto which the
# lab installs Antrea from its manifest build/yamls/antrea.yml (`kubectl
# apply`: the antrea-controller Deployment and the antrea-agent DaemonSet with
# its install-cni, antrea-agent and antrea-ovs containers), runs 4
# agnhost pods (the upstream e2e test image) that kube-scheduler spreads over
# both nodes, shows pod-to-pod connectivity across nodes (TCP and UDP) with
# `kubectl exec ... /agnhost connect`, a pod's logs, then applies a
# NetworkPolicy and shows what it allows. The lab stays up at the end so you can explore it
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

AGNHOST=registry.k8s.io/e2e-test-images/agnhost:2.66.1

step "1/10 Tearing down a lab left over from an earlier run (if any)"
"$LAB" down

step "2/10 Bringing up a 2-node lab: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, image registry + 2 real nodes (containerd, kubelet), then kubectl apply -f build/yamls/antrea.yml"
start=$(date +%s%N)
"$LAB" up --nodes 2 --runtime antrea --kubelet real
end=$(date +%s%N)
echo "antrea-lab up returned after $(( (end - start) / 1000000 )) ms"

step "3/10 kubectl get nodes -o wide; Antrea's pods, installed from build/yamls/antrea.yml"
kubectl get nodes -o wide
kubectl -n kube-system get pods -l app=antrea -o wide

step "4/10 Creating namespace $NS and a Deployment of 4 agnhost pods (netexec on TCP and UDP 80), spread over both nodes by kube-scheduler"
kubectl create namespace "$NS"
kubectl apply -n "$NS" -f - <<YAML
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
        image: $AGNHOST
        args: [netexec, --http-port=80, --udp-port=80]
        readinessProbe:
          httpGet: {path: /healthz, port: 80}
          periodSeconds: 2
        ports:
        - {containerPort: 80, protocol: TCP}
        - {containerPort: 80, protocol: UDP}
YAML

step "5/10 Waiting for the 4 pods to be Ready"
kubectl -n "$NS" rollout status deployment/web --timeout=180s
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

step "6/10 Connectivity matrix: kubectl exec -n $NS SRC -- /agnhost connect --protocol P --timeout 2s DST:80"
failures=0
for proto in tcp udp; do
  echo
  printf '%-6s %-28s' "$proto" "from \\ to"
  for d in "${pods[@]}"; do printf ' %-22s' "${d##*-}@${node[$d]}"; done
  echo
  for s in "${pods[@]}"; do
    printf '%-6s %-28s' "" "${s##*-}@${node[$s]} (${ip[$s]})"
    for d in "${pods[@]}"; do
      # One retry: the userspace datapath may lose the very first packet
      # between two nodes while it sets up (ENVIRONMENT.md, tunnels).
      if out=$(kubectl exec -n "$NS" "$s" -- /agnhost connect --protocol "$proto" --timeout 2s "${ip[$d]}:80" 2>&1) ||
        out=$(kubectl exec -n "$NS" "$s" -- /agnhost connect --protocol "$proto" --timeout 2s "${ip[$d]}:80" 2>&1); then
        printf ' %-22s' "ok"
      else
        printf ' %-22s' "FAIL:${out%%$'\n'*}"
        failures=$((failures + 1))
      fi
    done
    echo
  done
done
echo
echo "ok = connected (TCP) or answered (UDP); FAIL:reason = agnhost's TIMEOUT or REFUSED"
if [ "$failures" -ne 0 ]; then
  echo "$failures probes failed" >&2
  exit 1
fi
echo "every pod reaches every pod over TCP and UDP, within and across nodes"
echo
echo "kubectl logs -n $NS ${pods[0]} --tail=5 (netexec logs each request):"
kubectl logs -n "$NS" "${pods[0]}" --tail=5
echo
echo "kubectl exec -n $NS ${pods[0]} -- ip -br addr (the pod's interfaces, from its own image):"
kubectl exec -n "$NS" "${pods[0]}" -- ip -br addr

step "7/10 A NetworkPolicy: only pods labelled role=frontend may reach app=web (TCP 80)"
kubectl apply -n "$NS" -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: frontend, labels: {role: frontend}}
spec:
  nodeName: node-1
  containers: [{name: c, image: $AGNHOST}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, labels: {role: other}}
spec:
  nodeName: node-2
  containers: [{name: c, image: $AGNHOST}]
YAML
kubectl -n "$NS" wait --for=condition=Ready pod/frontend pod/other --timeout=60s
probe_clients() {
  local want_other=$1 bad=0
  printf '%-22s' "from \\ to"
  for d in "${pods[@]}"; do printf ' %-22s' "${d##*-}@${node[$d]}"; done
  echo
  for s in frontend other; do
    printf '%-22s' "$s"
    for d in "${pods[@]}"; do
      if out=$(kubectl exec -n "$NS" "$s" -- /agnhost connect --timeout 1s "${ip[$d]}:80" 2>&1); then
        v=ok
      else
        v=${out%%$'\n'*}
      fi
      printf ' %-22s' "$v"
      if [ "$s" = frontend ] && [ "$v" != ok ]; then bad=$((bad + 1)); fi
      if [ "$s" = other ] && [ "$v" != "$want_other" ]; then bad=$((bad + 1)); fi
    done
    echo
  done
  return $bad
}
echo "before the policy:"
probe_clients ok || { echo "unexpected verdicts before the policy" >&2; exit 1; }
kubectl apply -n "$NS" -f - <<'YAML'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-frontend}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {role: frontend}}}]
    ports: [{protocol: TCP, port: 80}]
YAML
start=$(date +%s%N)
# Probed from the host inside pod other's netns (antrea-lab exec, no kubectl
# round trip), so the figure is the time to enforcement, not to exec.
until "$LAB" exec -n "$NS" other -- antrea-testpod connect --protocol tcp --to "${ip[${pods[0]}]}:80" --timeout 200ms >/dev/null 2>&1; [ $? -eq 2 ]; do
  if [ $(( ($(date +%s%N) - start) / 1000000 )) -gt 30000 ]; then echo "policy not enforced after 30 s" >&2; exit 1; fi
done
echo "policy enforced $(( ($(date +%s%N) - start) / 1000000 )) ms after kubectl apply (as seen from pod other)"
echo "after the policy:"
probe_clients TIMEOUT || { echo "unexpected verdicts with the policy" >&2; exit 1; }
echo "frontend still reaches every web pod; other (not role=frontend) times out: isolated pods drop what no rule allows"

step "8/10 How Antrea computed and realized it"
kubectl get networkpolicies.controlplane.antrea.io
kubectl get addressgroups.controlplane.antrea.io,appliedtogroups.controlplane.antrea.io
echo
echo "conjunctive flows on node-1 (ovs-ofctl -O OpenFlow15 dump-flows _output/lab/nodes/node-1/ovs/br-int.mgmt):"
ovs-ofctl -O OpenFlow15 --no-stats dump-flows "$ROOT/_output/lab/nodes/node-1/ovs/br-int.mgmt" | grep -E 'conj|reg1=.*actions=drop' || true

step "9/10 Egress: pods leave the cluster with a fixed source IP (the outside host 172.30.0.3 reports what it sees)"
seen() { "$LAB" exec -n "$NS" "$1" -- curl -sS -m 3 http://172.30.0.3:8080/clientip; echo; }
echo "frontend -> outside host, before any Egress (masqueraded to its node):"
seen frontend
kubectl apply -f - <<YAML
apiVersion: crd.antrea.io/v1beta1
kind: ExternalIPPool
metadata:
  name: demo-pool
spec:
  ipRanges:
  - start: 172.30.0.200
    end: 172.30.0.209
  nodeSelector: {}
---
apiVersion: crd.antrea.io/v1beta1
kind: Egress
metadata:
  name: demo-frontend
spec:
  appliedTo:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: $NS
    podSelector:
      matchLabels:
        role: frontend
  externalIPPool: demo-pool
YAML
start=$(date +%s%N)
until [ -n "$(kubectl get egress demo-frontend -o jsonpath='{.status.egressNode}')" ]; do
  if [ $(( ($(date +%s%N) - start) / 1000000 )) -gt 30000 ]; then echo "Egress not assigned after 30 s" >&2; exit 1; fi
  sleep 0.2
done
kubectl get egress demo-frontend; kubectl get externalippool demo-pool
eip=$(kubectl get egress demo-frontend -o jsonpath='{.spec.egressIP}')
until seen frontend | grep -q "^$eip:"; do
  if [ $(( ($(date +%s%N) - start) / 1000000 )) -gt 30000 ]; then echo "frontend does not leave with $eip after 30 s" >&2; seen frontend; exit 1; fi
  sleep 0.2
done
echo "frontend -> outside host, with the Egress (its Egress IP, from whichever node holds it):"
seen frontend
echo "other (not selected) -> outside host:"
seen other

step "10/10 The lab"
"$LAB" status
if [ "$DEMO_KEEP" = "0" ]; then
  step "Tearing the lab down (DEMO_KEEP=0)"
  "$LAB" down
else
  cat <<EOT

The lab is still up. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl get pods -A -o wide
  kubectl get networkpolicies.controlplane.antrea.io
  kubectl exec -n $NS ${pods[0]} -- ip addr
  kubectl logs -n $NS ${pods[0]}
  crictl --runtime-endpoint unix://$ROOT/_output/lab/nodes/node-1/containerd/containerd.sock ps
  ovs-ofctl -O OpenFlow15 dump-flows _output/lab/nodes/node-1/ovs/br-int.mgmt
  $LAB logs antrea-agent --node 1
Tear it down with:  $LAB down   (or: make lab-down)
EOT
fi
