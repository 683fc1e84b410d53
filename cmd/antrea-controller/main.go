// Command antrea-controller computes NetworkPolicies once for the cluster and
// serves each Node's slice through the controlplane.antrea.io API. Its
// settings come from --config (antrea-controller.conf,
// docs/configuration.md) and flags given explicitly, which win. See
// pkg/controller/app.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/controller/app"
	"antrea.io/antrea/pkg/version"
)

func main() {
	opts := app.NewOptions()
	var showVersion bool
	cmd := &cobra.Command{
		Use:          "antrea-controller",
		Short:        "Compute NetworkPolicies and serve them to antrea-agents",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Println(version.String("antrea-controller"))
				return nil
			}
			if err := opts.Complete(cmd.Flags()); err != nil {
				return err
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			klog.InfoS("Starting", "version", version.String("antrea-controller"), "config", opts.ConfigFile)
			return app.Run(ctx, opts)
		},
	}
	cmd.Flags().BoolVar(&showVersion, "version", false, "Print the version and exit")
	opts.AddFlags(cmd.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlagSet(klogFlags)
	if err := cmd.Execute(); err != nil {
		klog.ErrorS(err, "antrea-controller failed")
		os.Exit(1)
	}
}
