#!/usr/bin/env bash
# l7policy.sh: what the layer 7 engine costs an HTTP client, measured in one
# run on one 2-node lab of real nodes (test/e2e TestL7NetworkPolicyCost):
# one client Pod sends 3,000 kept-alive GET requests to a server Pod on the
# other Node under a plain Allow rule, then under a layer 7 rule that allows
# them (every request inspected by the server Node's engine). Prints
# requests/s and latency p50/p99 of each. Needs root and a built tree;
# brings its lab up and down (none may be running).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || { echo "l7policy.sh brings up a lab: run it as root" >&2; exit 1; }
# shellcheck source=../lib/test-env.sh
source hack/lib/test-env.sh
mkdir -p _output/bench
ANTREA_BENCH_L7=1 go test -count=1 -run '^TestL7NetworkPolicyCost$' -v ./test/e2e/ | tee _output/bench/l7policy.log |
  sed -n -e 's/^ *l7policy_bench_test.go:[0-9]*: //p' -e '/^--- \|^FAIL\|^ok /p'
