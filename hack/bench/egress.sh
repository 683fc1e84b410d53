#!/usr/bin/env bash
# egress.sh: what an Egress costs a Pod's traffic to a host outside the
# cluster, measured in one run on one 2-node lab of real nodes
# (test/e2e TestEgressSNATCost): connections/s and one TCP stream to a server
# on the lab's outside host, from a Pod on the Node holding the Egress IP and
# from a Pod on the other Node, first masqueraded to their own Node's IP (no
# Egress), then with the Egress IP; every connection is checked to arrive
# from the address it should. Prints the figures and the ratios. Needs root
# and a built tree; brings its lab up and down (none may be running).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || { echo "egress.sh brings up a lab: run it as root" >&2; exit 1; }
# shellcheck source=../lib/test-env.sh
source hack/lib/test-env.sh
mkdir -p _output/bench
ANTREA_BENCH_EGRESS=1 go test -count=1 -run '^TestEgressSNATCost$' -v ./test/e2e/ | tee _output/bench/egress.log |
  sed -n -e 's/^ *egress_bench_test.go:[0-9]*: //p' -e '/^--- \|^FAIL\|^ok /p'
