// Command antrea-testpod is the lab's test pod program: `serve` answers TCP
// and UDP with the pod's name, `connect` probes an address and exits with the
// verdict (0 connected, 1 refused, 2 timeout, 3 could not probe).
package main

import (
	"context"
	"os"

	"antrea.io/antrea/pkg/testpod"
)

func main() {
	os.Exit(testpod.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
