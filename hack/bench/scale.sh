#!/usr/bin/env bash
# scale.sh is the scale bench of issue 31 (docs/scale.md): for each size in
# SCALE_NODES (comma-separated; default 100) it starts a real kube-apiserver
# and etcd (envtest, from `make install`'s _output/bin), runs the
# antrea-controller binary built here as a child process, creates that many
# simulated Nodes (pkg/lab/simnodes: Node objects with pod CIDRs and a fake
# kubelet that marks their pods Running with IPs, no containers) and one
# simulated agent per Node (pkg/agent/simulator: the real agent's policy
# watchers and rule cache, as the antrea-agent ServiceAccount), then:
#   - the workload: SCALE_PODS_PER_NODE pods per Node (default 10) in
#     namespaces of SCALE_NAMESPACE_SIZE pods (default 20) placed at random,
#     two K8s NetworkPolicies per namespace, SCALE_ACNPS cluster-wide ACNPs;
#   - SCALE_CHANGES rounds (default 10) of: a policy added, an ACNP changed,
#     a pod added, each timed to the last simulated agent that needs it;
#   - the controller's CPU-seconds and RSS, kube-apiserver's and etcd's RSS,
#     what each agent received (messages, bytes: median and max), and the
#     time a controller restart takes until every agent is synced again;
#   - correctness: every agent's final state equals the bench's own
#     recomputation from the API objects (span = Nodes hosting a pod the
#     policy applies to), after the changes and after the restart.
# Then it prints one table over the sizes and draws the curves into
# SCALE_SVG (default _output/scale/scale.svg).
#
# No lab is used (no netns, no real nodes): nothing to lock. Everything runs
# under nice. Usage: SCALE_NODES=100,1000 hack/bench/scale.sh
#
# SCALE_REAL_AGENT=N adds a run with a real agent (TestARealAgentAtScale): a
# lab of one real node beside N simulated Nodes (antrea-lab up --nodes 1
# --sim-nodes N; it needs make build and holds /tmp/antrea-lab.lock), the
# real agent's RSS, flows and policy realization measured in the empty
# cluster and again with the same workload on the simulated Nodes.
# SCALE_NODES= (empty) skips the simulated-agent sizes.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SCALE_NODES=${SCALE_NODES-100}
OUT=${SCALE_OUT_DIR:-$ROOT/_output/scale}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/_output/bin}
mkdir -p "$OUT"
results=$OUT/results-$(date -u +%Y%m%dT%H%M%S).jsonl
: >"$results"

go build -o "$OUT/antrea-controller" ./cmd/antrea-controller
go test -c -o "$OUT/scale.test" ./test/scale/
export ANTREA_CONTROLLER_BIN=$OUT/antrea-controller

IFS=, read -ra sizes <<<"$SCALE_NODES"
if [[ -n ${SCALE_REAL_AGENT:-} ]]; then
  n=$SCALE_REAL_AGENT
  echo "=== a real agent beside $n simulated nodes (a lab; waiting for /tmp/antrea-lab.lock)" >&2
  (cd test/scale && SCALE_OUT=$OUT/realagent-$(date -u +%Y%m%dT%H%M%S).jsonl flock /tmp/antrea-lab.lock nice -n 15 \
    "$OUT/scale.test" -test.run '^TestARealAgentAtScale$' -test.v -test.timeout 100m >"$OUT/realagent-$n.log" 2>&1) ||
    { tail -30 "$OUT/realagent-$n.log" >&2; echo "!!! the real agent beside $n nodes failed (log: $OUT/realagent-$n.log)" >&2; exit 1; }
  # A skip (no lab possible here) exits 0: say so instead of printing nothing.
  if grep -q -- '--- SKIP: TestARealAgentAtScale' "$OUT/realagent-$n.log"; then
    grep -B1 -- '--- SKIP' "$OUT/realagent-$n.log" >&2; echo "!!! the real agent beside $n nodes was skipped" >&2; exit 1
  fi
  sed -n '/the real node.s agent, empty cluster/,/the ACNPs. peers in the real node.s flows:/p' "$OUT/realagent-$n.log" >&2
fi
[[ ${#sizes[@]} -gt 0 ]] || exit 0
for n in "${sizes[@]}"; do
  echo "=== $n simulated nodes" >&2
  # The test binary's own log (klog of the in-process simulator) goes to a file.
  (cd test/scale && SCALE_NODES=$n SCALE_OUT=$results nice -n 15 "$OUT/scale.test" \
    -test.run '^TestScale$' -test.v -test.timeout 60m >"$OUT/scale-$n.log" 2>&1) ||
    { tail -30 "$OUT/scale-$n.log" >&2; echo "!!! $n nodes failed (log: $OUT/scale-$n.log)" >&2; exit 1; }
  grep -E '^\s+scale_test.go' "$OUT/scale-$n.log" >&2 || true
done
echo
(cd test/scale && SCALE_REPORT=$results SCALE_SVG=${SCALE_SVG:-$OUT/scale.svg} "$OUT/scale.test" -test.run '^TestScaleReport$')
echo "results: $results"
