#!/usr/bin/env bash
# Benchmarks the OpenFlow binding (pkg/ovs/openflow) against ovs-ofctl on a
# private OVS instance and prints each figure with its reference and ratio.
# Needs root and Open vSwitch. Extra arguments go to the program
# (e.g. -flows 20000 -rounds 1 for a quick look).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p _output/bin
go build -o _output/bin/openflow-bench ./hack/bench/openflow
exec _output/bin/openflow-bench "$@"
