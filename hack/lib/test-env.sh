# test-env.sh, sourced by hack/test.sh and hack/race.sh: the environment the
# project's go tests run in (tools on PATH, envtest's binaries, our
# binaries) and hack/judge, built into _output/tools.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$ROOT/_output/bin:$ROOT/_output/tools:$ROOT/_output/cni/bin:$PATH
export KUBEBUILDER_ASSETS=$ROOT/_output/bin
export ANTREA_BIN=$ROOT/bin
mkdir -p _output/test _output/tools
go build -o _output/tools/judge ./hack/judge
