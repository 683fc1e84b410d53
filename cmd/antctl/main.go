// Command antctl shows what Antrea computed and what a node realized; run it
// from a laptop with a kubeconfig, or inside the antrea-agent container
// (local mode). See pkg/antctl and docs/antctl.md.
package main

import (
	"os"

	"antrea.io/antrea/pkg/antctl"
)

func main() {
	os.Exit(antctl.Main(os.Args[1:]))
}
