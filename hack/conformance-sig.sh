#!/usr/bin/env bash
# conformance-sig.sh (make conformance-sig): runs the Kubernetes SIG
# network-policy-api conformance suites, unchanged, against a 2-node lab of
# real nodes, and writes each suite's own report:
#
#   v0.2.0  TestConformanceProfiles, profile ClusterNetworkPolicy, with the
#           experimental features ClusterNetworkPolicyNamedPorts and
#           ClusterNetworkPolicyEgressNodePeers
#           -> _output/conformance-sig/v0.2.0/report.yaml
#   v0.1.7  TestConformanceProfiles, profiles AdminNetworkPolicy and
#           BaselineAdminNetworkPolicy, with the named-port and node-peer
#           features of both -> _output/conformance-sig/v0.1.7/report.yaml
#
# The suites are the modules' own conformance/ packages, fetched by the Go
# module proxy at exactly these versions and tested from a temporary module
# that requires them (as `go test sigs.k8s.io/network-policy-api/conformance`
# would in the SIG's repository). One change is made, at run time, and
# printed: this kernel has no SCTP, so the suites' base manifests lose
# exactly their `agnhost porter` containers, the ones serving SCTP ports
# (9003/9005; in v0.2.0 the host-network pod's two are templated ports);
# their pods would otherwise never be Ready. Go refuses -overlay for files in
# the module cache, so the module is copied next to the temporary module, the
# filter applied to conformance/base/manifests.yaml only, and the copy used
# through a replace directive; `diff -r` against the module cache is printed
# and must show that one file. The suites' SCTP tests and SCTP probes still
# run and fail here (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails).
#
# What is exempt, exactly: a failed assertion that judges a PokeServer probe
# ("Should be true", or v0.2.0's "Condition never satisfied") right after
# that probe logged "FAILED Command was [/agnhost connect ... --protocol=sctp
# ...]". Nothing else: a require.NoError (e.g. "unable to patch the admin
# network policy"), a TCP or UDP probe, a probe whose kubectl exec failed
# ("FAILED to execute command", SCTP or not), a second assertion after one
# probe, a failure of TestConformanceProfiles itself, a panic or a timeout
# each fail the run (hack/judge's `judge sig`, read from go test -json
# events; its tests feed it such failures: hack/judge/sig_test.go).
#
#   SIG_VERSIONS   which suites (default "v0.2.0 v0.1.7")
#   SIG_REUSE=1    run against the lab that is up instead of a new one
#   SIG_KEEP=1     leave the lab up afterwards
#   SIG_LAB_ARGS   more antrea-lab up flags, e.g. '--ip-family dual' (issue 33
#                  asks for the suites on a dual-stack lab; docs/sig-network-policy-api.md)
#   SIG_RUN        a go test -run regex inside the suite (default: all)
#   SIG_BUILD_ONLY=1  only build the suites' test binaries
#   SIG_TIMEOUT    go test -test.timeout of each suite (default 60m)
#   SIG_REALIZATION=N  then measure a ClusterNetworkPolicy's realization N times
#                  (default 50, 0: not) -> _output/conformance-sig/realization.txt
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
export KUBECONFIG=$ROOT/_output/lab/kubeconfig
LAB=$ROOT/bin/antrea-lab
OUT=$ROOT/_output/conformance-sig
WORK=${SIG_WORK:-$ROOT/_output/conformance-sig-build}
VERSIONS=${SIG_VERSIONS:-"v0.2.0 v0.1.7"}
MOD=sigs.k8s.io/network-policy-api

profiles() {
  case $1 in
    v0.2.*) echo "ClusterNetworkPolicy" ;;
    *) echo "AdminNetworkPolicy,BaselineAdminNetworkPolicy" ;;
  esac
}
features() {
  case $1 in
    v0.2.*) echo "ClusterNetworkPolicyNamedPorts,ClusterNetworkPolicyEgressNodePeers" ;;
    *) echo "AdminNetworkPolicyNamedPorts,AdminNetworkPolicyEgressNodePeers,BaselineAdminNetworkPolicyNamedPorts,BaselineAdminNetworkPolicyEgressNodePeers" ;;
  esac
}

# drop_sctp_porters: every container list item whose block runs
# "/agnhost porter" (the SCTP servers) is left out; everything else is
# copied byte for byte.
drop_sctp_porters() {
  awk '
    function flush() {
      if (n > 0 && !porter) for (i = 1; i <= n; i++) print buf[i]
      if (n > 0 && porter) dropped++
      n = 0; porter = 0
    }
    {
      match($0, /^ */); ind = RLENGTH
      if (n > 0 && (ind < item || (ind == item && $0 ~ /^ *- /) || $0 ~ /^---/)) flush()
      if (n == 0 && $0 ~ /^ *- name: /) { item = ind; n = 1; buf[1] = $0; next }
      if (n > 0) { buf[++n] = $0; if ($0 ~ /\/agnhost porter/) porter = 1; next }
      print
    }
    END { flush(); print dropped + 0 > "/dev/stderr" }'
}

# build VERSION: the suite's test binary into $WORK/VERSION/conformance.test.
build() {
  local v=$1 dir=$WORK/$1
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$dir" && GOFLAGS=-mod=mod go mod download -json "$MOD@$v" >download.json)
  local src
  src=$(jq -r .Dir "$dir/download.json")
  cp -r "$src" "$dir/module"; chmod -R u+w "$dir/module"
  local n
  n=$(drop_sctp_porters <"$src/conformance/base/manifests.yaml" 2>&1 >"$dir/module/conformance/base/manifests.yaml")
  echo "[$v] dropped $n SCTP 'agnhost porter' containers from conformance/base/manifests.yaml:"
  diff -r "$src" "$dir/module" | grep -E '^(Only|diff)' || true
  diff "$src/conformance/base/manifests.yaml" "$dir/module/conformance/base/manifests.yaml" | grep -E '^< +- name:' || true
  [ "$(diff -rq "$src" "$dir/module" | wc -l)" -eq 1 ] || { echo "[$v] the copy differs in more than the base manifests" >&2; exit 1; }
  cat >"$dir/go.mod" <<EOF
module sigconformance.local/run

go 1.26

require $MOD $v

replace $MOD $v => ./module
EOF
  cp "$dir/module/go.sum" "$dir/go.sum"
  echo 'package run' >"$dir/doc.go"
  (cd "$dir" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true)
  (cd "$dir" && GOFLAGS=-mod=mod go test -c -o conformance.test "$MOD/conformance")
}

# clean_leftovers: an interrupted run (killed suite: its cleanups never
# ran) leaves its policies behind, and the next run's tests meet them (a
# leftover Admin Deny fails tests that do not expect it). Every SIG policy
# and the NetworkPolicies of the suites' Namespaces go before a run.
clean_leftovers() {
  kubectl delete clusternetworkpolicies.policy.networking.k8s.io,adminnetworkpolicies.policy.networking.k8s.io,baselineadminnetworkpolicies.policy.networking.k8s.io \
    --all --ignore-not-found --wait=true >/dev/null 2>&1 || true
  local ns
  for ns in $(kubectl get namespaces -o name 2>/dev/null | grep '^namespace/network-policy-conformance-' | cut -d/ -f2); do
    kubectl -n "$ns" delete networkpolicies.networking.k8s.io --all --ignore-not-found >/dev/null 2>&1 || true
  done
  # A suite deletes its namespaces as it ends; a run started while they
  # terminate cannot create its pods in them (SIG_REUSE=1 runs back to back).
  local left
  left=$(kubectl get namespaces -o name 2>/dev/null | grep '^namespace/network-policy-conformance-' || true)
  [ -z "$left" ] || kubectl wait --for=delete $left --timeout=180s >/dev/null 2>&1 || true
}

# realization N: a ClusterNetworkPolicy's realization on the lab, N times:
# x/a (first node) serves TCP 80; an Antrea application-tier Reject refuses
# x/b (second node) at once; a loop in x/b connects until one succeeds while
# an Admin ClusterNetworkPolicy accepting x/b is applied (tier 220 before
# application 250); a sample is the time from kubectl apply to that
# connection (the pods share the host's clock). The policy is deleted and x/b
# refused again before the next sample.
realization() {
  local n=$1 ns=sig-realization-$$ img=registry.k8s.io/e2e-test-images/agnhost:2.66.1
  local nodes=($(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'))
  kubectl create namespace "$ns" >/dev/null && kubectl label namespace "$ns" sigr="$ns" >/dev/null
  local p
  for p in a:${nodes[0]} b:${nodes[1]}; do
    kubectl -n "$ns" run "${p%%:*}" --image=$img --labels=pod="${p%%:*}" \
      --overrides="{\"spec\":{\"nodeName\":\"${p#*:}\"}}" -- netexec --http-port=80 >/dev/null
  done
  kubectl -n "$ns" wait --for=condition=Ready pod/a pod/b --timeout=120s >/dev/null
  local ip
  ip=$(kubectl -n "$ns" get pod a -o jsonpath='{.status.podIP}')
  kubectl apply -f - >/dev/null <<Y
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: $ns-reject}
spec:
  tier: application
  priority: 1
  appliedTo: [{podSelector: {matchLabels: {pod: a}}, namespaceSelector: {matchLabels: {sigr: $ns}}}]
  ingress: [{action: Reject, from: [{podSelector: {matchLabels: {pod: b}}, namespaceSelector: {matchLabels: {sigr: $ns}}}]}]
Y
  until ! kubectl -n "$ns" exec b -- /agnhost connect --timeout=1s "$ip:80" 2>/dev/null; do sleep 0.2; done
  local samples=() returned=() i t0 ta t1 tmp
  tmp=$(mktemp)
  for i in $(seq 1 "$n"); do
    kubectl -n "$ns" exec b -- sh -c "while ! /agnhost connect --timeout=1s $ip:80 2>/dev/null; do :; done; date +%s%N" >"$tmp" &
    sleep 1.5
    t0=$(date +%s%N)
    kubectl apply -f - >/dev/null <<Y
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: $ns-accept}
spec:
  tier: Admin
  priority: 1
  subject: {pods: {namespaceSelector: {matchLabels: {sigr: $ns}}, podSelector: {matchLabels: {pod: a}}}}
  ingress: [{action: Accept, from: [{pods: {namespaceSelector: {matchLabels: {sigr: $ns}}, podSelector: {matchLabels: {pod: b}}}}]}]
Y
    ta=$(date +%s%N)
    wait
    t1=$(cat "$tmp")
    samples+=($(( (t1 - t0) / 1000000 )))
    returned+=($(( t1 > ta ? (t1 - ta) / 1000000 : 0 )))
    kubectl delete clusternetworkpolicies.policy.networking.k8s.io "$ns-accept" >/dev/null
    until ! kubectl -n "$ns" exec b -- /agnhost connect --timeout=1s "$ip:80" 2>/dev/null; do sleep 0.2; done
  done
  rm -f "$tmp"
  kubectl delete acnp "$ns-reject" >/dev/null
  kubectl delete namespace "$ns" --wait=false >/dev/null
  local sorted after
  sorted=($(printf '%s\n' "${samples[@]}" | sort -n))
  after=($(printf '%s\n' "${returned[@]}" | sort -n))
  n=${#sorted[@]}
  mkdir -p "$OUT"
  # The policy exists somewhere between kubectl's start (which counts its own
  # start-up, ~0.1 s here) and its return: both bounds are given.
  {
    echo "ClusterNetworkPolicy realization (first accepted connection across nodes after kubectl apply started), $n samples (ms): ${sorted[*]}"
    echo "  after kubectl apply returned (ms): ${after[*]}"
    echo "from kubectl apply's start: p50 ${sorted[$((n / 2))]} ms, p99 ${sorted[$(( (n * 99 + 99) / 100 - 1 ))]} ms; from its return: p50 ${after[$((n / 2))]} ms, p99 ${after[$(( (n * 99 + 99) / 100 - 1 ))]} ms"
  } | tee "$OUT/realization.txt"
}

# run VERSION: the suite against the lab; its report, its go test -json
# events (test.json, through Go's cmd/test2json, which attributes every line
# to its test) and the plain log made from them (test.log).
run() {
  local v=$1 out=$OUT/$1
  rm -rf "$out"; mkdir -p "$out"
  clean_leftovers
  echo "[$v] TestConformanceProfiles: profiles $(profiles "$v"), features $(features "$v")"
  set +e
  (cd "$WORK/$v/module/conformance" && "$TEST2JSON" -t -p "$MOD/conformance@$v" "$WORK/$v/conformance.test" \
    -test.v=test2json -test.run "TestConformanceProfiles${SIG_RUN:+/$SIG_RUN}" -test.timeout "${SIG_TIMEOUT:-60m}" \
    -conformance-profiles="$(profiles "$v")" \
    -supported-features="$(features "$v")" \
    -organization=antrea.io -project=antrea-in-go -url=https://antrea.io -version="$(git -C "$ROOT" describe --tags --always --dirty)" \
    -contact=none -additional-info="make conformance-sig on the lab (docs/lab.md)" \
    -report-output="$out/report.yaml") >"$out/test.json" 2>"$out/test.stderr"
  local rc=$?
  set -e
  jq -j 'select(.Action == "output") | .Output' "$out/test.json" >"$out/test.log" 2>/dev/null || true
  # The verdict is per failed assertion (hack/judge, `judge sig`): the run
  # passes only when every failed assertion is a failed SCTP probe (the only
  # exemption: this kernel has no SCTP); a failed require/assert of any other
  # kind, a TCP/UDP probe, a probe whose kubectl exec failed, a t.Fatal, a
  # panic or a timeout fails it.
  set +e
  "$JUDGE" sig -json "$out/test.json" -name "$v" | tee "$out/summary.txt"
  local verdict=${PIPESTATUS[0]}
  set -e
  echo "[$v] suite exit code $rc; the suite's report: $out/report.yaml; log: $out/test.log; events: $out/test.json"
  return "$verdict"
}

[ "$(id -u)" -eq 0 ] || { echo "conformance-sig brings up a lab: run it as root" >&2; exit 1; }
JUDGE=$ROOT/_output/tools/judge
TEST2JSON=$ROOT/_output/tools/test2json
mkdir -p "$(dirname "$JUDGE")"
go build -o "$JUDGE" ./hack/judge
go build -o "$TEST2JSON" cmd/test2json
for v in $VERSIONS; do build "$v"; done
[ "${SIG_BUILD_ONLY:-0}" != 1 ] || exit 0

if [ "${SIG_REUSE:-0}" != 1 ]; then
  "$LAB" down >/dev/null
  # shellcheck disable=SC2086 # flags, split on purpose
  "$LAB" up --nodes 2 ${SIG_LAB_ARGS:-}
  if [ "${SIG_KEEP:-0}" != 1 ]; then trap '"$LAB" down >/dev/null' EXIT; fi
fi

rc=0
for v in $VERSIONS; do run "$v" || rc=1; done
if [ "${SIG_REALIZATION:-50}" -gt 0 ]; then realization "${SIG_REALIZATION:-50}"; fi
exit $rc
