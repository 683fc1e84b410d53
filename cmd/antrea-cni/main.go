// Command antrea-cni is the CNI plugin binary the container runtime runs for
// every pod. It forwards each verb to the local antrea-agent over gRPC.
//
// `antrea-cni chain --conf-dir DIR --conflist FILE` is the install step of
// trafficEncapMode networkPolicyOnly (the install-cni init container runs
// it): it writes DIR/05-antrea.conflist, the primary CNI's configuration
// found in DIR with the plugin of Antrea's conflist FILE after its own.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"antrea.io/antrea/pkg/cni"
	"antrea.io/antrea/pkg/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println(version.String("antrea-cni"))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "chain" {
		if err := chain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "antrea-cni chain:", err)
			os.Exit(1)
		}
		return
	}
	client := &cni.Client{}
	skel.PluginMainFuncs(client.Funcs(), cni.PluginInfo(), version.String("antrea-cni"))
}

func chain(args []string) error {
	fs := flag.NewFlagSet("chain", flag.ContinueOnError)
	dir := fs.String("conf-dir", "/etc/cni/net.d", "the runtime's CNI configuration directory, where the primary CNI's configuration is")
	conflist := fs.String("conflist", "/etc/antrea/antrea-cni.conflist", "Antrea's conflist, whose plugin is chained")
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the primary's configuration to appear")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := os.ReadFile(*conflist)
	if err != nil {
		return err
	}
	var own struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(data, &own); err != nil {
		return fmt.Errorf("--conflist %s: %w", *conflist, err)
	}
	if len(own.Plugins) != 1 {
		return fmt.Errorf("--conflist %s: want exactly one plugin, got %d", *conflist, len(own.Plugins))
	}
	primary, err := cni.WriteChained(*dir, own.Plugins[0], *wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "antrea-cni chain: wrote %s/%s: %s's plugins, then antrea\n", *dir, cni.ChainedConfListName, primary)
	return nil
}
