// Command flow-aggregator is the Flow Aggregator: it receives the agents'
// flow records (gRPC or IPFIX), joins both Nodes' records of a connection and exports
// them (IPFIX, a JSON-lines log, an HTTP API). See pkg/flowaggregator and
// docs/flow-export.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/flowaggregator"
	"antrea.io/antrea/pkg/version"
)

func main() {
	opts := &flowaggregator.Options{}
	var showVersion bool
	cmd := &cobra.Command{
		Use:          "flow-aggregator",
		Short:        "Join and export the agents' flow records",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Println(version.String("flow-aggregator"))
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			klog.InfoS("Starting", "version", version.String("flow-aggregator"))
			return flowaggregator.Run(ctx, opts)
		},
	}
	cmd.Flags().BoolVar(&showVersion, "version", false, "Print the version and exit")
	opts.AddFlags(cmd.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlagSet(klogFlags)
	if err := cmd.Execute(); err != nil {
		klog.ErrorS(err, "flow-aggregator failed")
		os.Exit(1)
	}
}
