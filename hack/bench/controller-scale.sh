#!/usr/bin/env bash
# controller-scale.sh runs the NetworkPolicy computation on the workload shapes
# of issue 5 (those of upstream Antrea's scale tests; Pods spread over 1,000
# Nodes) at full size, once each, and prints time, CPU time and peak heap next
# to upstream's published references where there is one:
#   (a) 25k namespaces x (default-deny + 2 policies + 4 pods)  upstream ~6 s, ~1.6 GB
#   (b) 100 namespaces x (default-deny + 100 policies x 10 pods)
#   (c) 1 namespace, 10k policies selecting/allowing the same 10k pods  upstream ~10.7 s, ~1.16 GB
#   (d) 1 namespace, 10k pods, one policy per pod allowing one other pod
#   (e) upstream's XLargeScaleWithClusterScopedNetpol: 1k namespaces, 100k pods,
#       10k K8s NetworkPolicies whose peers select pods of 10 namespaces
#   (f) the same shape as 10k ClusterNetworkPolicies
# For (e) and (f), UPSTREAM_NP_TEST may name upstream Antrea's compiled
# pkg/controller/networkpolicy test binary (go test -c in a checkout of
# antrea-io/antrea; antrea.io/libOpenflow and antrea.io/ofnet can be replaced by
# local copies): its BenchmarkInitXLargeScaleWithClusterScopedNetpol runs here
# too, and the ratios compare time and bytes allocated, after the informers
# synced (a lower bound: upstream's Init benchmark feeds the objects to the
# computation without informers, and times its selector index) and for the
# whole op (an upper bound: it includes the informers and the fake clientset).
# The measurement lives in pkg/controller/networkpolicy/scale_bench_test.go:
# informers start on a fake clientset that lists the prebuilt objects (without
# the fake's deep-copying tracker) and the op ends when every queue is empty.
# Peak heap (HeapAlloc sampled every 20 ms) includes the workload's objects, as
# upstream's does; upstream's also includes its fake tracker's copies. Wall time
# depends on the load of this shared 2-core VM: compare cpu-s too.
# Usage: hack/bench/controller-scale.sh [SCALE] [SHAPES]   (defaults: 1, ABCD)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCALE=${1:-1}
SHAPES=${2:-ABCDEF}
cd "$ROOT"
out=$(ANTREA_BENCH_SCALE=$SCALE go test -run '^$' -bench "^BenchmarkScale[$SHAPES]" -benchtime 1x \
  -timeout 60m ./pkg/controller/networkpolicy/ 2>&1) || { echo "$out" >&2; exit 1; }
echo "$out" | grep -E '^Benchmark|workload:' >&2
up_s=""; up_mb=""
if [ -n "${UPSTREAM_NP_TEST:-}" ] && [[ $SHAPES == *[EF]* ]]; then
  # Upstream's benchmark reads no testdata, but runs from its package directory.
  up=$("$UPSTREAM_NP_TEST" -test.run '^$' -test.bench 'BenchmarkInitXLargeScaleWithClusterScopedNetpol$' \
    -test.benchtime 1x -test.benchmem 2>&1 | grep '^Benchmark') || true
  echo "upstream: $up" >&2
  up_s=$(echo "$up" | awk '{print $3 / 1e9}')
  up_mb=$(echo "$up" | awk '{print $5 / 1048576}')
fi
echo
printf '%-6s %10s %10s %12s %12s %12s %12s\n' shape wall-s cpu-s peak-heap-MB upstream-s upstream-MB ratio-t/m
echo "$out" | awk -v up_s="$up_s" -v up_mb="$up_mb" '
  /^BenchmarkScale/ {
    shape = substr($1, 15, 1)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "s/compute") wall = $i
      if ($(i+1) == "cpu-s/compute") cpu = $i
      if ($(i+1) == "peak-heap-MB") peak = $i
      if ($(i+1) == "s-after-sync/compute") after = $i
      if ($(i+1) == "alloc-MB/compute") alloc = $i
      if ($(i+1) == "alloc-MB-after-sync/compute") allocAfter = $i
    }
    ref_t = ""; ref_m = ""; ratio = "-"
    if (shape == "A") { ref_t = 6.0; ref_m = 1600 }
    if (shape == "C") { ref_t = 10.7; ref_m = 1160 }
    if (ref_t != "") ratio = sprintf("%.2f/%.2f", wall / ref_t, peak / ref_m)
    if ((shape == "E" || shape == "F") && up_s != "") {
      ref_t = sprintf("%.2f", up_s); ref_m = sprintf("%.0f", up_mb)
      ratio = sprintf("%.2f/%.2f after sync, %.2f/%.2f whole op", after / up_s, allocAfter / up_mb, wall / up_s, alloc / up_mb)
    }
    printf "%-6s %10.2f %10.2f %12.0f %12s %12s %12s\n", "(" tolower(shape) ")", wall, cpu, peak, (ref_t == "" ? "-" : ref_t), (ref_m == "" ? "-" : ref_m), ratio
  }'
