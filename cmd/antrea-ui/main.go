// Command antrea-ui serves the Antrea web UI: the embedded frontend and its
// JSON API, reading the cluster with its own service account. See pkg/ui
// and docs/ui.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ui"
	"antrea.io/antrea/pkg/version"
)

func main() {
	opts := &ui.Options{}
	var showVersion bool
	cmd := &cobra.Command{
		Use:          "antrea-ui",
		Short:        "Serve the Antrea web UI",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Println(version.String("antrea-ui"))
				return nil
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			klog.InfoS("Starting", "version", version.String("antrea-ui"))
			return ui.Run(ctx, opts)
		},
	}
	cmd.Flags().BoolVar(&showVersion, "version", false, "Print the version and exit")
	opts.AddFlags(cmd.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlagSet(klogFlags)
	if err := cmd.Execute(); err != nil {
		klog.ErrorS(err, "antrea-ui failed")
		os.Exit(1)
	}
}
