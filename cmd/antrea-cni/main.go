// Command antrea-cni is the CNI plugin binary the container runtime runs for
// every pod. It forwards each verb to the local antrea-agent over gRPC.
package main

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"antrea.io/antrea/pkg/cni"
	"antrea.io/antrea/pkg/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println(version.String("antrea-cni"))
		return
	}
	client := &cni.Client{}
	skel.PluginMainFuncs(client.Funcs(), cni.PluginInfo(), version.String("antrea-cni"))
}
