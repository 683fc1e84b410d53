#!/usr/bin/env bash
# race.sh (make race, part of make conformance): the tests of the agent's and
# the controller's packages (pkg/agent/..., pkg/controller/...: unit tests,
# and as root the integration tests on real OVS and kube-apiservers) under
# Go's race detector. A data race fails the test it happened in. Output as
# in make test: go test's, then every skipped test and why (hack/judge
# gotest); events in _output/test/go-test-race.json.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/test-env.sh"
start=$(date +%s)
set +e
go test -race -count=1 -p 1 -timeout 60m -json ./pkg/agent/... ./pkg/controller/... 2>&1 |
  _output/tools/judge gotest -o _output/test/go-test-race.json
rc=$?
set -e
echo "go test -race ./pkg/agent/... ./pkg/controller/...: $(( $(date +%s) - start )) s"
exit $rc
