// Command antrea-agent-simulator runs many simulated antrea-agents in one
// process (pkg/agent/simulator): one per Node named, each watching its span
// of the controlplane API with the real agent's watchers, as the
// antrea-agent ServiceAccount; through kube-apiserver unless --direct
// (the real agents' path: see the flag). It writes a JSON report (per agent: messages,
// bytes, what it holds; median and max) every --interval and at exit.
// docs/scale.md shows it beside `antrea-lab up --sim-nodes N`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/simulator"
	"antrea.io/antrea/pkg/lab/simnodes"
)

func main() {
	var (
		kubeconfig, serviceAccount, report string
		nodes                              []string
		interval                           time.Duration
		direct                             bool
	)
	cmd := &cobra.Command{
		Use:          "antrea-agent-simulator",
		Short:        "Run simulated antrea-agents (one per Node) and report what each receives",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("--interval must be positive, got %s", interval)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
			}
			if len(nodes) == 0 {
				kube, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					return err
				}
				l, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: simnodes.Label + "=true"})
				if err != nil {
					return fmt.Errorf("listing the simulated Nodes: %w", err)
				}
				for _, n := range l.Items {
					nodes = append(nodes, n.Name)
				}
				if len(nodes) == 0 {
					return fmt.Errorf("--nodes: none given and no Node has the label %s=true (antrea-lab up --sim-nodes N)", simnodes.Label)
				}
			}
			agentCfg, err := simulator.AsServiceAccount(ctx, cfg, serviceAccount)
			if err != nil {
				return fmt.Errorf("--service-account: %w", err)
			}
			newSim := simulator.NewThroughKubeAPIServer
			if direct {
				newSim = simulator.New
			}
			sim, err := newSim(agentCfg, nodes)
			if err != nil {
				return err
			}
			done := make(chan struct{})
			go func() { sim.Run(ctx); close(done) }()
			write := func() {
				if report == "" {
					return
				}
				b, _ := json.MarshalIndent(sim.Summarize(), "", " ")
				if err := os.WriteFile(report+".tmp", b, 0o644); err == nil {
					_ = os.Rename(report+".tmp", report)
				}
			}
			start := time.Now()
			if err := sim.WaitSynced(ctx); err == nil {
				klog.InfoS("Every simulated agent synced", "agents", len(nodes), "after", time.Since(start))
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				write()
				select {
				case <-ctx.Done():
					<-done
					write()
					return nil
				case <-t.C:
				}
			}
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig with the right to request a token of --service-account")
	cmd.Flags().StringVar(&serviceAccount, "service-account", "kube-system/antrea-agent", "identity of every simulated agent (namespace/name): the real agents'")
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "Nodes to simulate an agent for (default: every Node labelled "+simnodes.Label+"=true)")
	cmd.Flags().StringVar(&report, "report", "", "JSON report file, rewritten every --interval and at exit")
	cmd.Flags().BoolVar(&direct, "direct", false, "dial antrea-controller directly as the real agents do (its Service's endpoint, CA from ConfigMap kube-system/antrea-ca); "+
		"off by default: a lab's controller endpoint is a Node address the host must not dial, so the agents go through kube-apiserver")
	cmd.Flags().DurationVar(&interval, "interval", 10*time.Second, "how often the report is written")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlagSet(klogFlags)
	if err := cmd.Execute(); err != nil {
		klog.ErrorS(err, "antrea-agent-simulator failed")
		os.Exit(1)
	}
}
