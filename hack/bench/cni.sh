#!/usr/bin/env bash
# cni.sh measures CNI ADD latency (p50/p99) on one node for 100 sequential and
# 20 concurrent ADDs: antrea (libcni -> antrea-cni -> CNIServer -> veth, OVS
# port, flows on a real userspace OVS), the same on a dual-stack node (an
# IPv4 and an IPv6 address per pod; docs/ipv6.md), next to the reference
# bridge + host-local plugins, in the same run, and prints the ratios. Needs root and
# Open vSwitch (hack/install.sh). The measurement lives in
# pkg/agent/cniserver/bench_test.go (TestCNIAddLatencyReport).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REF=${CNI_REFERENCE_BIN:-$ROOT/_output/cni/bin}
for p in bridge host-local; do
  [ -x "$REF/$p" ] || { echo "missing $REF/$p: run hack/install.sh cni" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, OVS)" >&2; exit 1; }
cd "$ROOT"
ANTREA_CNI_BENCH=1 CNI_REFERENCE_BIN=$REF go test -v -count=1 -timeout 20m \
  -run '^TestCNIAddLatencyReport$' ./pkg/agent/cniserver/ 2>&1 |
  grep -v -E '^(I|E|W)[0-9]{4} |^\s+20[0-9]{2}-|^=== RUN'
