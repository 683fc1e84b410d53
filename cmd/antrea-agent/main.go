// Command antrea-agent runs on every node: it owns the node's Open vSwitch,
// serves the CNI and programs the OpenFlow pipeline. Its settings come from
// --config (antrea-agent.conf, docs/configuration.md) and flags given
// explicitly, which win. See pkg/agent/app.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/app"
	"antrea.io/antrea/pkg/version"
)

func main() {
	o := app.NewOptions()
	fs := flag.NewFlagSet("antrea-agent", flag.ExitOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	o.AddFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.String("antrea-agent"))
		return
	}
	if err := o.Complete(fs); err != nil {
		klog.ErrorS(err, "Invalid configuration")
		klog.Flush()
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Starting antrea-agent", "version", version.String("antrea-agent"), "node", o.NodeName, "config", o.ConfigFile)
	if err := app.Run(ctx, o); err != nil {
		klog.ErrorS(err, "antrea-agent failed")
		klog.Flush()
		os.Exit(1)
	}
}
