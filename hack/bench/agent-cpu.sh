#!/usr/bin/env bash
# agent-cpu.sh [SECONDS]: the CPU time (user + system) each antrea-agent of a
# running lab uses over SECONDS (default 60), from /proc/PID/stat. Used for
# the NodeLatencyMonitor figure (docs/node-latency-monitor.md): run it once
# without a NodeLatencyMonitor and once with one.
set -euo pipefail
d=${1:-60}
pids=$(ps -eo pid=,args= | awk '$2 == "antrea-agent" && $3 == "--config" {print $1}')
[ -n "$pids" ] || { echo "no antrea-agent process (is a lab up?)" >&2; exit 1; }
tick=$(getconf CLK_TCK)
declare -A before
for p in $pids; do before[$p]=$(awk '{print $14 + $15}' "/proc/$p/stat"); done
sleep "$d"
for p in $pids; do
  after=$(awk '{print $14 + $15}' "/proc/$p/stat")
  awk -v p="$p" -v a="$after" -v b="${before[$p]}" -v t="$tick" -v d="$d" \
    'BEGIN {printf "antrea-agent pid %s: %.2f CPU-s in %ss\n", p, (a - b) / t, d}'
done
