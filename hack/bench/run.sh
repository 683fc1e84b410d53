#!/usr/bin/env bash
# Runs every benchmark script in hack/bench, one after another.
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)"
status=0
for script in "$dir"/*.sh; do
	[ "$(basename "$script")" = run.sh ] && continue
	echo "=== $(basename "$script")"
	"$script" || { echo "!!! $(basename "$script") failed"; status=1; }
	echo
done
exit $status
