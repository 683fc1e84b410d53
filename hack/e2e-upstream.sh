#!/usr/bin/env bash
# e2e-upstream.sh (make e2e-upstream): runs upstream Kubernetes' own e2e
# suite, e2e.test v1.37.2 built from k8s.io/kubernetes/test/e2e by
# hack/install.sh, unchanged, against a 2-node lab of real nodes, and
# reports every spec as passed, failed or skipped (with the reason).
#
#   E2E_FOCUS  ginkgo focus regex (default: every NetworkPolicy spec,
#              "[sig-network] Netpol" and "[sig-network] NetworkPolicy", and
#              every Services and DNS spec marked [Conformance])
#   E2E_SKIP   ginkgo skip regex (default: the specs tagged
#              [Feature:SCTPConnectivity], the ones that open SCTP sockets,
#              which this kernel cannot: socket(AF_INET, SOCK_STREAM,
#              IPPROTO_SCTP) fails. Specs that only name SCTP in a policy and
#              probe TCP run: failing them is a security hole.)
#   E2E_FLAKE_ATTEMPTS  how many times a failing spec is run before it counts
#              as failed (default 2, ginkgo's --flake-attempts); a spec that
#              passed only on a later attempt is listed as "flaky": a
#              NetworkPolicy spec (name matching E2E_STRICT, default
#              'Netpol|NetworkPolicy') that needed a retry fails the run (its
#              first attempt saw a wrong reachability matrix), a Services or
#              DNS one is listed and counted, never hidden
#
# The verdict is hack/judge's (`judge ginkgo`, unit-tested in hack/judge),
# read from ginkgo's JSON report: the run fails when a spec failed, timed
# out or panicked (whatever its name), a NetworkPolicy spec was flaky, the
# suite failed outside any spec, no selected spec ran, or e2e.test exited
# non-zero.
#   E2E_SKIP_REASON  why E2E_SKIP skips (printed with every skipped spec)
#   E2E_REPORT_DIR   where the report and logs go (default _output/e2e-upstream)
#   E2E_KEEP=1 leaves the lab up afterwards
#   E2E_PROCS  parallel ginkgo processes (default 1; more run e2e.test under
#              the ginkgo CLI, as upstream's CI does)
#   E2E_REUSE=1 runs against the lab that is up instead of a new one
#   E2E_LAB_ARGS  more flags of `antrea-lab up` (e.g. "--ip-family dual")
#   E2E_NETNS  runs e2e.test inside that network namespace of the lab (e.g.
#              antrea-lab-client, a host beyond the lab's router), reaching
#              kube-apiserver at E2E_APISERVER (default
#              https://172.30.0.2:6443, the control plane on the underlay),
#              as a client outside the cluster does: the LoadBalancer specs
#              dial ingress IPs and node ports from e2e.test itself
#   E2E_LB_POOL  "FIRST-LAST": creates, before the run, the lab's default
#              ExternalIPPool (lab-lb, which the lab's antrea-controller gives
#              LoadBalancer Services without the pool annotation) with that
#              range, and deletes it after the run
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
export KUBECONFIG=$ROOT/_output/lab/kubeconfig
LAB=$ROOT/bin/antrea-lab
FOCUS=${E2E_FOCUS:-'\[sig-network\] (Netpol|NetworkPolicy)|\[sig-network\] (Services|DNS) .*\[Conformance\]'}
SKIP=${E2E_SKIP:-'\[Feature:SCTPConnectivity\]'}
STRICT=${E2E_STRICT:-'Netpol|NetworkPolicy'}
SKIP_REASON=${E2E_SKIP_REASON:-"opens SCTP sockets ([Feature:SCTPConnectivity]): this kernel has no SCTP (socket(AF_INET, SOCK_STREAM, 132): protocol not supported)"}
REPORT_DIR=${E2E_REPORT_DIR:-$ROOT/_output/e2e-upstream}
E2E=$ROOT/_output/bin/e2e.test
GINKGO=$ROOT/_output/tools/ginkgo
PROCS=${E2E_PROCS:-1}

[ "$(id -u)" -eq 0 ] || { echo "e2e-upstream brings up a lab: run it as root" >&2; exit 1; }
[ -x "$E2E" ] || { echo "$E2E is missing: run hack/install.sh" >&2; exit 1; }
[ "$PROCS" -le 1 ] || [ -x "$GINKGO" ] || { echo "$GINKGO is missing: run hack/install.sh" >&2; exit 1; }
JUDGE=$ROOT/_output/tools/judge
mkdir -p "$(dirname "$JUDGE")"
go build -o "$JUDGE" ./hack/judge

if [ "${E2E_REUSE:-0}" != 1 ]; then
  "$LAB" down >/dev/null
  # shellcheck disable=SC2086 # E2E_LAB_ARGS is a list of flags
  "$LAB" up --nodes 2 ${E2E_LAB_ARGS:-}
  if [ "${E2E_KEEP:-0}" != 1 ]; then trap '"$LAB" down >/dev/null' EXIT; fi
fi

rm -rf "$REPORT_DIR"; mkdir -p "$REPORT_DIR"
if [ -n "${E2E_LB_POOL:-}" ]; then
  printf 'apiVersion: crd.antrea.io/v1beta1\nkind: ExternalIPPool\nmetadata:\n  name: lab-lb\nspec:\n  nodeSelector: {}\n  ipRanges:\n  - start: %s\n    end: %s\n' \
    "${E2E_LB_POOL%-*}" "${E2E_LB_POOL#*-}" | kubectl apply -f - >/dev/null
fi
run_in=()
kc=$KUBECONFIG
if [ -n "${E2E_NETNS:-}" ]; then
  # A kubeconfig of the same credentials whose server is the control plane's
  # address on the underlay (the host's points at a relay on its loopback).
  kc=$REPORT_DIR/kubeconfig
  sed "s#server: .*#server: ${E2E_APISERVER:-https://172.30.0.2:6443}#" "$KUBECONFIG" >"$kc"
  run_in=(ip netns exec "$E2E_NETNS" env KUBECONFIG="$kc")
fi
echo "e2e.test v1.37.2 ($PROCS ginkgo process(es)): focus '$FOCUS', skip '$SKIP'"
start=$(date +%s)
set +e
ginkgo_flags=(
  --focus="$FOCUS"
  --skip="$SKIP"
  --no-color
  --timeout=3h
  --flake-attempts="${E2E_FLAKE_ATTEMPTS:-2}"
  --json-report="$REPORT_DIR/report.json"
  --junit-report="$REPORT_DIR/junit.xml"
)
# --num-nodes as upstream's hack/ginkgo-e2e.sh passes it: without it only
# ginkgo's first process counts the nodes, and the others skip every spec
# that needs two ("Requires at least 2 nodes (not -1)").
nodes=$(kubectl get nodes --no-headers | wc -l)
e2e_flags=(--kubeconfig="$kc" --provider=skeleton --num-nodes="$nodes" --report-dir="$REPORT_DIR")
if [ "$PROCS" -gt 1 ]; then
  # The ginkgo CLI runs the precompiled suite in $PROCS processes and merges
  # their reports into one (what upstream's hack/ginkgo-e2e.sh does);
  # [Serial] specs still run alone, after the others.
  "${run_in[@]}" "$GINKGO" --procs="$PROCS" "${ginkgo_flags[@]}" "$E2E" -- "${e2e_flags[@]}" >"$REPORT_DIR/e2e.log" 2>&1
else
  "${run_in[@]}" "$E2E" "${e2e_flags[@]}" "${ginkgo_flags[@]/#--/--ginkgo.}" >"$REPORT_DIR/e2e.log" 2>&1
fi
rc=$?
set -e
end=$(date +%s)
if [ -n "${E2E_LB_POOL:-}" ]; then
  # Its IPs are released once the specs' namespaces (and Services) are gone.
  kubectl delete externalippool lab-lb --ignore-not-found --wait=false >/dev/null 2>&1 || true
fi

# Every spec the focus selected (and every spec that ran, whatever its
# name): its state, its time, and why it failed or was skipped; passed,
# then skipped, then flaky, then failed specs, so that the end of the output
# (what a CI log's tail keeps) names every failure with its message and
# location. The verdict (summary and reasons) is printed last.
set +e
"$JUDGE" ginkgo -report "$REPORT_DIR/report.json" -focus "$FOCUS" -skip "$SKIP" \
  -sctp '\[Feature:SCTPConnectivity\]' -sctp-reason "$SKIP_REASON" -strict "$STRICT" \
  -tsv "$REPORT_DIR/specs.tsv" -verdict "$REPORT_DIR/verdict.txt"
judged=$?
set -e
[ -f "$REPORT_DIR/specs.tsv" ] || : >"$REPORT_DIR/specs.tsv"
[ -f "$REPORT_DIR/verdict.txt" ] || echo "verdict: FAIL: no readable report ($REPORT_DIR/report.json)" >"$REPORT_DIR/verdict.txt"
echo
failed=$(awk -F'\t' '$1!="passed" && $1!="skipped" && $1!="flaky"' "$REPORT_DIR/specs.tsv" | wc -l)
flaky=$(awk -F'\t' '$1=="flaky"' "$REPORT_DIR/specs.tsv" | wc -l)
# When a spec failed, even once: Antrea's logs and the API server's view of
# the aggregated API go into the report directory while the lab is still up,
# and the events that most often explain a policy realized late (the agents'
# controlplane watches ending, the APIService turning unavailable, a restart)
# are counted on a few lines, so that a CI log's tail holds them.
if [ "$failed" -gt 0 ] || [ "$flaky" -gt 0 ] || [ "$judged" -ne 0 ] || [ "$rc" -ne 0 ]; then
  diag=$REPORT_DIR/antrea
  mkdir -p "$diag"
  kubectl -n kube-system get pods -l app=antrea -o wide >"$diag/pods.txt" 2>&1 || true
  kubectl get apiservices -o yaml >"$diag/apiservices.yaml" 2>&1 || true
  for pod in $(kubectl -n kube-system get pods -l app=antrea -o name 2>/dev/null); do
    for c in $(kubectl -n kube-system get "$pod" -o jsonpath='{.spec.containers[*].name}' 2>/dev/null); do
      kubectl -n kube-system logs "$pod" -c "$c" >"$diag/${pod#pod/}-$c.log" 2>&1 || true
      kubectl -n kube-system logs "$pod" -c "$c" --previous >"$diag/${pod#pod/}-$c.previous.log" 2>/dev/null || rm -f "$diag/${pod#pod/}-$c.previous.log"
    done
  done
  cp "$ROOT/_output/lab/logs/kube-apiserver.log" "$diag/" 2>/dev/null || true
  for f in "$diag"/antrea-agent-*-antrea-agent.log; do
    [ -f "$f" ] || continue
    # Only the ends after the agent's first sync (at start-up the controller
    # may not serve yet).
    ended=$(awk '/NetworkPolicy watchers synced/ { synced = 1; next } synced && /Watch of controlplane resource ended/ { print substr($2, 1, 8) }' "$f" |
      uniq -c | head -n 10 | awk '{printf "%s(%d) ", $2, $1}')
    echo "diagnostics: $(basename "$f" .log): controlplane watch ends after the first sync: ${ended:-none}"
  done
  echo "diagnostics: restarts $(awk 'NR > 1 {printf "%s=%s ", $1, $4}' "$diag/pods.txt"); APIService unavailable in kube-apiserver.log: $(grep -a -c -E 'controlplane.antrea.io.*(503|unavailable|failing)' "$diag/kube-apiserver.log" 2>/dev/null || echo 0) lines; all in $diag"
fi
echo "upstream e2e v1.37.2 in $((end - start)) s (log: $REPORT_DIR/e2e.log, JUnit: $REPORT_DIR/junit.xml, e2e.test exit code $rc):"
cat "$REPORT_DIR/verdict.txt"
[ "$rc" -eq 0 ] && [ "$judged" -eq 0 ]
