#!/usr/bin/env bash
# services.sh: Services as a client pod sees them, AntreaProxy next to
# upstream's kube-proxy v1.37.2 (nftables mode) measured the same way in one
# run: a 2-node lab with each (`antrea-lab up --proxy antrea|kube-proxy`),
# then hack/bench/services (EndpointSlice -> first connection, connection
# setup through a ClusterIP at 1 and at SERVICES Services, connections per
# second and throughput through a ClusterIP and straight to the pod, time to
# program SERVICES Services with 2 endpoints each and one more at that scale,
# the proxy's RSS and what it holds in OVS / nftables). Prints each figure
# with kube-proxy's and the ratio. Needs root and a built tree; brings labs up
# and down (none may be running).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$ROOT/bin:$ROOT/_output/bin:$PATH
LAB=$ROOT/bin/antrea-lab
SERVICES=${SERVICES:-10000}
SAMPLES=${SAMPLES:-20}
OUT=$ROOT/_output/bench/services
[ "$(id -u)" -eq 0 ] || { echo "services.sh brings up labs: run it as root" >&2; exit 1; }
mkdir -p "$OUT"
go build -o "$ROOT/_output/bin/services-bench" ./hack/bench/services
trap '"$LAB" down >/dev/null 2>&1 || true' EXIT

for proxy in antrea kube-proxy; do
  "$LAB" down >/dev/null
  "$LAB" up --nodes 2 --proxy "$proxy" >/dev/null
  echo "measuring $proxy ($SERVICES Services)..." >&2
  "$ROOT/_output/bin/services-bench" --proxy "$proxy" --services "$SERVICES" --samples "$SAMPLES" >"$OUT/$proxy.json"
done
"$LAB" down >/dev/null

jq -rn --slurpfile a "$OUT/antrea.json" --slurpfile k "$OUT/kube-proxy.json" '
  def row(name; key; better):
    ($a[0][key]) as $x | ($k[0][key]) as $y |
    [name, ($x|tostring), ($y|tostring),
     (if $y == 0 then "-" else (($x / $y * 100 | round) / 100 | tostring) + "x" end),
     better] | @tsv;
  (["figure", "AntreaProxy", "kube-proxy", "ratio", "better is"] | @tsv),
  row("EndpointSlice -> first connection p50 (ms)"; "ProgramP50Ms"; "lower"),
  row("EndpointSlice -> first connection p99 (ms)"; "ProgramP99Ms"; "lower"),
  row("connect via ClusterIP, 1 Service, p50 (us)"; "Connect1P50Us"; "lower"),
  row("connect via ClusterIP, 1 Service, p99 (us)"; "Connect1P99Us"; "lower"),
  row("connect straight to the pod, p50 (us)"; "ConnectPodP50Us"; "lower"),
  row("connections/s via ClusterIP"; "CPSClusterIP"; "higher"),
  row("connections/s straight to the pod"; "CPSPod"; "higher"),
  row("throughput via ClusterIP (Mbit/s)"; "MbpsClusterIP"; "higher"),
  row("throughput straight to the pod (Mbit/s)"; "MbpsPod"; "higher"),
  row("create \($a[0].Scale) Services + slices (s, API)"; "CreateS"; "same work"),
  row("... until the last one answers (s)"; "ProgramAllS"; "lower"),
  row("+1 Service at \($a[0].Scale): slice -> first connection (ms)"; "PlusOneMs"; "lower"),
  row("connect via ClusterIP at \($a[0].Scale), p50 (us)"; "ConnectScaleP50Us"; "lower"),
  row("connect via ClusterIP at \($a[0].Scale), p99 (us)"; "ConnectScaleP99Us"; "lower"),
  row("proxy RSS at 0 (MiB; kube-proxy: + the agent)"; "RSSMiB0"; "lower"),
  row("proxy RSS at \($a[0].Scale) (MiB)"; "RSSMiBScale"; "lower"),
  row("OVS flows at 0"; "Flows0"; "-"),
  row("OVS flows at \($a[0].Scale)"; "FlowsScale"; "-"),
  row("OVS groups at \($a[0].Scale)"; "GroupsScale"; "-"),
  row("nftables rules+elements at \($a[0].Scale)"; "NftRulesScale"; "-")
' | column -t -s $'\t'
echo "(raw: $OUT/antrea.json, $OUT/kube-proxy.json; ratio = AntreaProxy / kube-proxy)"
