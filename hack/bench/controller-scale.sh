#!/usr/bin/env bash
# controller-scale.sh runs the NetworkPolicy computation on the workload shapes
# of issue 5 (those of upstream Antrea's scale tests; Pods spread over 1,000
# Nodes) at full size and prints time, CPU time and peak heap, next to
# upstream Antrea's own benchmark of the same shape run on this machine in the
# same invocation when UPSTREAM_NP_TEST is set:
#   (a) 25k namespaces x (default-deny + 2 policies + 4 pods)
#       upstream BenchmarkInitXLargeScaleWithSmallNamespaces (published ~6 s, ~1.6 GB)
#   (b) 100 namespaces x (default-deny + 100 policies x 10 pods)
#       upstream BenchmarkInitXLargeScaleWithLargeNamespaces
#   (c) 1 namespace, 10k policies selecting/allowing the same 10k pods
#       upstream BenchmarkInitXLargeScaleWithOneNamespace (published ~10.7 s, ~1.16 GB)
#   (d) 1 namespace, 10k pods, one policy per pod allowing one other pod
#       upstream BenchmarkInitXLargeScaleWithNetpolPerPod
#   (e) upstream's XLargeScaleWithClusterScopedNetpol: 1k namespaces, 100k pods,
#       10k K8s NetworkPolicies whose peers select pods of 10 namespaces
#       upstream BenchmarkInitXLargeScaleWithClusterScopedNetpol
#   (f) the same shape as 10k ClusterNetworkPolicies (compared with the same
#       upstream benchmark: upstream has no ACNP variant of it)
# Ours runs with the Antrea-native kinds enabled and the controller's 4 sync
# workers (ANTREA_BENCH_WORKERS overrides); upstream's Init benchmarks drain
# their queues on one goroutine.
#
# Two of ours per shape: BenchmarkInit<shape> does what upstream's Init
# benchmark does (objects already in the informers' caches; the timed op feeds
# them to the event handlers, which build the selector index, and syncs until
# every queue is empty): its ratio is the one to read. BenchmarkScale<shape>
# starts real informers on a fake clientset and reports the part after the
# handlers synced (a lower bound of the comparable cost) and the whole op (an
# upper bound), with the peak heap.
#
# UPSTREAM_NP_TEST names upstream Antrea's compiled pkg/controller/networkpolicy
# test binary. The ratios compare time and bytes allocated (upstream's B/op).
# How it was built here (2026-12-02, antrea-io/antrea fc70f2bb7; the Go module
# proxy refuses antrea.io/libOpenflow and antrea.io/ofnet, so they come from
# their GitHub repositories; the networkpolicy package compiles them in, its
# benchmarks run none of their code):
#   git --git-dir=<antrea-io/antrea clone> archive HEAD | tar -x -C /tmp/upstream-antrea
#   git --git-dir=<antrea-io/libOpenflow clone> archive HEAD | tar -x -C /tmp/up-libOpenflow  # 0ffb857, v0.16.0+
#   git --git-dir=<antrea-io/ofnet clone> archive HEAD | tar -x -C /tmp/up-ofnet              # 3796388, v0.14.0+
#   # upstream wants ofnet v0.15.1, whose ofctrl.FlowMatch has a CtZone field HEAD lacks:
#   # pkg/ovs/openflow only compiles with it, so add the field (unused by these tests):
#   sed -i 's|^\tCtMark        uint32 |\tCtZone *uint16\n&|' /tmp/up-ofnet/ofctrl/fgraphFlow.go
#   cd /tmp/upstream-antrea && go mod edit -replace antrea.io/libOpenflow=/tmp/up-libOpenflow \
#     -replace antrea.io/ofnet=/tmp/up-ofnet && go test -c -o /tmp/upstream-np.test ./pkg/controller/networkpolicy
#
# The measurement lives in pkg/controller/networkpolicy/scale_bench_test.go:
# informers start on a fake clientset that lists the prebuilt objects (without
# the fake's deep-copying tracker) and the op ends when every queue is empty.
# Peak heap (HeapAlloc sampled every 20 ms) includes the workload's objects, as
# upstream's does; upstream's also includes its fake tracker's copies. Wall time
# depends on the load of this shared 2-core VM: compare cpu-s too, and use
# REPEAT (each round runs both sides of every shape; the medians are printed).
#
# Usage: [UPSTREAM_NP_TEST=path] [REPEAT=3] hack/bench/controller-scale.sh [SCALE] [SHAPES]
#        (defaults: 1, ABCDEF)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCALE=${1:-1}
SHAPES=${2:-ABCDEF}
REPEAT=${REPEAT:-1}
cd "$ROOT"

declare -A UPSTREAM=(
  [A]=BenchmarkInitXLargeScaleWithSmallNamespaces
  [B]=BenchmarkInitXLargeScaleWithLargeNamespaces
  [C]=BenchmarkInitXLargeScaleWithOneNamespace
  [D]=BenchmarkInitXLargeScaleWithNetpolPerPod
  [E]=BenchmarkInitXLargeScaleWithClusterScopedNetpol
  [F]=BenchmarkInitXLargeScaleWithClusterScopedNetpol
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/np.test" ./pkg/controller/networkpolicy/

rows="$tmp/rows"
: >"$rows"
for round in $(seq 1 "$REPEAT"); do
  for ((i = 0; i < ${#SHAPES}; i++)); do
    shape=${SHAPES:i:1}
    out=$(cd pkg/controller/networkpolicy && ANTREA_BENCH_SCALE=$SCALE "$tmp/np.test" -test.run '^$' \
      -test.bench "^Benchmark(Init|Scale)$shape" -test.benchtime 1x -test.timeout 60m 2>&1) || { echo "$out" >&2; exit 1; }
    line="$(echo "$out" | grep -E '^BenchmarkInit') $(echo "$out" | grep -E '^BenchmarkScale')"
    echo "round $round ours:     $line" >&2
    up="- -"
    if [ -n "${UPSTREAM_NP_TEST:-}" ] && [ "$SCALE" = 1 ]; then
      # Upstream's benchmark reads no testdata, but runs from its package directory.
      upline=$("$UPSTREAM_NP_TEST" -test.run '^$' -test.bench "${UPSTREAM[$shape]}\$" \
        -test.benchtime 1x -test.benchmem -test.timeout 60m 2>&1 | grep '^Benchmark') || true
      echo "round $round upstream: $upline" >&2
      up=$(echo "$upline" | awk '{print $3 / 1e9, $5 / 1048576}')
    fi
    echo "$shape $round $up $line" >>"$rows"
  done
done

echo
echo "medians of $REPEAT round(s); ratios = ours / upstream (time/bytes allocated): init = the same procedure as"
echo "upstream's Init benchmark (the figure to compare); after sync / whole op = lower / upper bounds from the Scale runs"
printf '%-5s %7s %7s %8s %10s %11s %11s %11s %11s %8s %8s\n' shape init-s cpu-s alloc-MB upstream-s upstream-MB "ratio init" "after sync" "whole op" scale-s peak-MB
awk '
  function median(arr, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
  }
  function med(name, sh, n,   k, a) {
    split("", a); for (k = 1; k <= n; k++) a[k] = v[name, sh, k]; return median(a, n)
  }
  {
    shape = $1; up_s = $3; up_mb = $4
    if (!(shape in seen)) { seen[shape] = 1; order[++nshapes] = shape }
    k = ++cnt[shape]
    for (i = 5; i < NF; i++) {
      if ($(i+1) == "s/init") v["init", shape, k] = $i
      if ($(i+1) == "cpu-s/init") v["initcpu", shape, k] = $i
      if ($(i+1) == "alloc-MB/init") v["initalloc", shape, k] = $i
      if ($(i+1) == "s/compute") v["wall", shape, k] = $i
      if ($(i+1) == "peak-heap-MB") v["peak", shape, k] = $i
      if ($(i+1) == "s-after-sync/compute") v["after", shape, k] = $i
      if ($(i+1) == "alloc-MB/compute") v["alloc", shape, k] = $i
      if ($(i+1) == "alloc-MB-after-sync/compute") v["allocAfter", shape, k] = $i
    }
    v["ups", shape, k] = up_s; v["upm", shape, k] = up_mb
    if (up_s != "-") {
      v["rit", shape, k] = v["init", shape, k] / up_s; v["rim", shape, k] = v["initalloc", shape, k] / up_mb
      v["rat", shape, k] = v["after", shape, k] / up_s; v["ram", shape, k] = v["allocAfter", shape, k] / up_mb
      v["rwt", shape, k] = v["wall", shape, k] / up_s; v["rwm", shape, k] = v["alloc", shape, k] / up_mb
    }
  }
  END {
    for (s = 1; s <= nshapes; s++) {
      sh = order[s]; n = cnt[sh]
      us = "-"; um = "-"; r0 = "-"; r1 = "-"; r2 = "-"
      if (v["ups", sh, 1] != "-") {
        us = sprintf("%.2f", med("ups", sh, n)); um = sprintf("%.0f", med("upm", sh, n))
        r0 = sprintf("%.2f/%.2f", med("rit", sh, n), med("rim", sh, n))
        r1 = sprintf("%.2f/%.2f", med("rat", sh, n), med("ram", sh, n))
        r2 = sprintf("%.2f/%.2f", med("rwt", sh, n), med("rwm", sh, n))
      }
      printf "(%s)   %7.2f %7.2f %8.0f %10s %11s %11s %11s %11s %8.2f %8.0f\n", tolower(sh), med("init", sh, n), med("initcpu", sh, n), med("initalloc", sh, n), us, um, r0, r1, r2, med("wall", sh, n), med("peak", sh, n)
    }
  }' "$rows"
