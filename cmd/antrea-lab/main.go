// Command antrea-lab runs a real multi-node Kubernetes cluster on this
// machine, made of network namespaces: `up`, `down`, `status`, `exec`, `logs`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/lab/nodesim"
	"antrea.io/antrea/pkg/version"
)

// exitError carries a command's exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	lab.CloseInheritedFDsOnExec()
	root := newRootCommand()
	err := root.Execute()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "antrea-lab:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	opts := lab.DefaultOptions()
	root := &cobra.Command{
		Use:           "antrea-lab",
		Short:         "A real multi-node Kubernetes cluster on this machine, in network namespaces",
		Version:       version.String("antrea-lab"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlagSet(klogFlags)
	opts.AddGlobalFlags(root.PersistentFlags())

	root.AddCommand(upCommand(&opts), downCommand(&opts), statusCommand(&opts), execCommand(&opts),
		logsCommand(&opts), loadCommand(&opts), imagesCommand(&opts), stopCommand(&opts), startCommand(&opts),
		rebootCommand(&opts), nodesimCommand(), nodeMountsCommand())
	return root
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

func upCommand(opts *lab.Options) *cobra.Command {
	var foreground bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Bring up a lab and return once every node is Ready (the supervisor keeps running in the background)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			if foreground {
				return lab.Supervise(ctx, *opts, func(format string, args ...any) {
					fmt.Fprintf(cmd.OutOrStdout(), lab.ProgressPrefix+format+"\n", args...)
				})
			}
			return lab.Up(ctx, *opts, cmd.OutOrStdout())
		},
	}
	opts.AddUpFlags(cmd.Flags())
	cmd.Flags().BoolVar(&foreground, "foreground", false, "be the supervisor: run until SIGINT/SIGTERM, then tear the lab down")
	return cmd
}

func downCommand(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the lab and remove every netns, veth, process and file it made",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Down(cmd.Context(), *opts, cmd.OutOrStdout())
		},
	}
}

func statusCommand(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the lab's components, nodes, kubeconfig and logs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Status(cmd.Context(), *opts, cmd.OutOrStdout())
		},
	}
}

func execCommand(opts *lab.Options) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "exec -n NAMESPACE POD -- COMMAND [ARGS...]",
		Short: "Run a command inside a pod's network namespace, passing its output and exit code through",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: antrea-lab exec -n NAMESPACE POD -- COMMAND [ARGS...]")
			}
			ctx, cancel := signalContext()
			defer cancel()
			code, err := lab.Exec(ctx, *opts, namespace, args[0], args[1:], os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the pod's namespace")
	return cmd
}

func logsCommand(opts *lab.Options) *cobra.Command {
	var node string
	cmd := &cobra.Command{
		Use:   "logs COMPONENT [--node NODE]",
		Short: "Print a component's log (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, supervisor, nodesim --node N)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lab.Logs(*opts, args[0], node, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node of a per-node component (node-1 or 1)")
	return cmd
}

func stopCommand(opts *lab.Options) *cobra.Command {
	var node string
	var kill bool
	cmd := &cobra.Command{
		Use:   "stop COMPONENT [--node NODE] [--kill]",
		Short: "Stop a daemon of the lab (etcd, kube-apiserver, kubelet --node N, ...) and keep it stopped until `start`",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := lab.StopComponent(cmd.Context(), *opts, args[0], node, kill)
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), out)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node of a per-node daemon")
	cmd.Flags().BoolVar(&kill, "kill", false, "SIGKILL rather than SIGTERM")
	return cmd
}

func startCommand(opts *lab.Options) *cobra.Command {
	var node string
	cmd := &cobra.Command{
		Use:   "start COMPONENT [--node NODE]",
		Short: "Start again, with the same command line, a daemon that `stop` stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := lab.StartComponent(cmd.Context(), *opts, args[0], node)
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), out)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node of a per-node daemon")
	return cmd
}

func rebootCommand(opts *lab.Options) *cobra.Command {
	var down time.Duration
	cmd := &cobra.Command{
		Use:   "reboot NODE [--down DURATION]",
		Short: "Power-cycle a real node: kill all its processes, empty its tmpfs directories, make its netns anew, boot it on the same disk state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := lab.RebootNode(cmd.Context(), *opts, args[0], down)
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), out)
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&down, "down", 0, "how long the node stays off")
	return cmd
}

// nodesimCommand is run by the supervisor inside each node's netns.
func nodesimCommand() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:    "nodesim --config FILE",
		Short:  "Run the node simulator of one lab node (started by the supervisor)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(configPath)
			if err != nil {
				return fmt.Errorf("read nodesim config: %w", err)
			}
			var cfg nodesim.Config
			if err := json.Unmarshal(data, &cfg); err != nil {
				return fmt.Errorf("decode nodesim config %s: %w", configPath, err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			klog.InfoS("Starting node simulator", "node", cfg.NodeName, "version", version.String("antrea-lab"))
			return nodesim.Run(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "nodesim configuration (JSON of nodesim.Config)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func nodeMountsCommand() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:    "node-mounts --config FILE",
		Short:  "Hold a real node's mount namespace (started by the supervisor under unshare --mount)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			return lab.NodeMounts(ctx, configPath)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the node's mounts (JSON)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func loadCommand(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "load FILE.tar...",
		Short: "Add the images of tar files (docker save, crane, OCI layout) to the lab registry, as `kind load image-archive` does",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range args {
				names, err := lab.Load(*opts, f)
				if err != nil {
					return fmt.Errorf("load %s: %w", f, err)
				}
				for _, n := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "loaded %s\n", n)
				}
			}
			return nil
		},
	}
}

func imagesCommand(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "images",
		Short: "Build the lab's images (antrea-agent, antrea-controller, agnhost, pause, antrea-testpod) where their inputs changed, then list the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			if err := lab.EnsureImages(*opts); err != nil {
				return err
			}
			return lab.ListImages(*opts, cmd.OutOrStdout())
		},
	}
}
