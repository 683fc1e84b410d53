// Package antctl is Antrea's command-line tool (cmd/antctl): it shows what
// the controller computed (the controlplane.antrea.io NetworkPolicies,
// AppliedToGroups and AddressGroups), what a node realized (its pod
// interfaces and OpenFlow flows), versions and feature gates.
//
// It runs in two places. From a laptop it reaches the cluster with a
// kubeconfig, as kubectl does (--kubeconfig, --context, -n). Inside the
// antrea-agent container it runs in local mode: it finds the agent's conf
// file (/etc/antrea/antrea-agent.conf), reads OVSDB and the bridge's OpenFlow
// table through the same sockets the agent uses, and reaches the API server
// with the agent's own connection settings. Commands that read a node's OVS
// work only in local mode until the agent serves an API of its own.
//
// A command is flags, then a query that returns data, then a printer (as
// kubectl's pkg/cmd/<verb>): the questions about what the controller
// computed are answered by pkg/antctl/query, which takes its clients as
// values and knows no flags, so a web UI's backend asks them the same way.
// docs/antctl.md is the user's guide.
package antctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/config"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// Where Antrea runs; the manifest (build/yamls/antrea.yml) puts it there.
const (
	antreaNamespace    = query.AntreaNamespace
	antreaConfigMap    = query.AntreaConfigMap
	agentDaemonSet     = "antrea-agent"
	controllerName     = "antrea-controller"
	componentLabel     = "component"
	defaultConfigDir   = "/etc/antrea"
	userAgent          = "antctl"
	localModeHowTo     = "kubectl -n kube-system exec ds/antrea-agent -c antrea-agent -- antctl"
	nodeNameEnv        = "NODE_NAME"
	defaultNamespace   = "default"
	maxNamesPerCell    = 3
	maxConcurrentLists = 8
)

// Clients are the API clients a command uses (the query layer's).
type Clients = query.Clients

// Env is the world one antctl run sees. Zero fields take the process's own:
// stdout, stderr, clients from the kubeconfig flags. Tests fill it with
// fakes.
type Env struct {
	Out, Err io.Writer
	// Clients, when set, replaces the clients built from the flags.
	Clients func() (*Clients, error)
	// NodeName is this node's name in local mode (Main takes $NODE_NAME,
	// which the manifest sets in the agent container); "" for unknown.
	NodeName string
}

// options are the global flags and what they resolve to.
type options struct {
	env       Env
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
	configDir string
	verbosity int
	// timeout bounds the whole command (upstream's -t/--timeout); 0 for none.
	timeout time.Duration
	// stop releases the timeout's context.
	stop    context.CancelFunc
	clients *Clients
}

// NewCommand returns antctl's root command.
func NewCommand(env Env) *cobra.Command {
	if env.Out == nil {
		env.Out = os.Stdout
	}
	if env.Err == nil {
		env.Err = os.Stderr
	}
	o := &options{
		env:       env,
		loading:   clientcmd.NewDefaultClientConfigLoadingRules(),
		overrides: &clientcmd.ConfigOverrides{},
	}
	root := &cobra.Command{
		Use:   "antctl",
		Short: "antctl shows what Antrea computed and what a node realized",
		Long: `antctl shows what Antrea computed and what a node realized.

From a laptop it reaches the cluster through a kubeconfig, as kubectl does.
Inside the antrea-agent container it runs in local mode (it finds
` + filepath.Join(defaultConfigDir, agentconfig.FileName) + `) and can also read that node's OVS:
  ` + localModeHowTo + ` get ovsflows -T Classifier`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			o.preRun(cmd)
		},
		PersistentPostRun: func(*cobra.Command, []string) { o.release() },
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0], "command")
		},
	}
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	pf := root.PersistentFlags()
	// -k, -s, -t and -v are upstream antctl's short forms
	// (pkg/antctl/command_list.go, applyPersistentFlagsToRoot).
	pf.StringVarP(&o.loading.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "k", "", "Path to the kubeconfig file to use")
	overrideFlags := clientcmd.RecommendedConfigOverrideFlags("")
	overrideFlags.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(o.overrides, pf, overrideFlags)
	// kubectl's other connection flags work as there; the help lists the
	// common ones, as kubectl does (kubectl options lists the rest).
	for _, name := range []string{"as", "as-group", "as-uid", "certificate-authority", "client-certificate", "client-key",
		"disable-compression", "insecure-skip-tls-verify", "password", "proxy-url", "tls-server-name", "token", "username"} {
		_ = pf.MarkHidden(name)
	}
	pf.StringVar(&o.configDir, "config-dir", defaultConfigDir,
		"Local mode: the directory holding "+agentconfig.FileName+" and "+controllerconfig.FileName)
	pf.IntVarP(&o.verbosity, "verbose", "v", 0, "Log level of antctl's own logs (0: none; -v alone: all)")
	pf.Lookup("verbose").NoOptDefVal = strconv.Itoa(allLogs)
	// --v=N, as kubectl spells it, is the same level.
	pf.IntVar(&o.verbosity, "v", 0, "Log level of antctl's own logs")
	_ = pf.MarkHidden("v")
	pf.DurationVarP(&o.timeout, "timeout", "t", 0, "Time limit of the whole command (0: none)")
	_ = root.RegisterFlagCompletionFunc(clientcmd.FlagNamespace, o.completeNamespaces)
	root.AddCommand(newVersionCommand(o), newGetCommand(o))
	root.AddCommand(newTraceflowCommand(o))
	root.AddCommand(newPacketCaptureCommand(o))
	root.AddCommand(newCheckCommand(o))
	root.AddCommand(newSupportBundleCommand(o))
	root.AddCommand(newQueryCommand(o))
	root.AddCommand(newUICommand(o))
	return root
}

// Main runs antctl with args and returns the process exit code. An error is
// one line on stderr.
func Main(args []string) int {
	cmd := NewCommand(Env{NodeName: os.Getenv(nodeNameEnv)})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "antctl: %v\n", err)
		return 1
	}
	return 0
}

// allLogs is the log level of -v without a value: every log line.
const allLogs = 10

// preRun sets up what every command shares: logging and --timeout.
func (o *options) preRun(cmd *cobra.Command) {
	o.setUpLogging()
	if o.timeout > 0 && o.stop == nil {
		ctx, stop := context.WithTimeout(cmd.Context(), o.timeout)
		o.stop = stop
		cmd.SetContext(ctx)
	}
}

// release ends what preRun started.
func (o *options) release() {
	if o.stop != nil {
		o.stop()
	}
}

// setUpLogging keeps the libraries' logs (client-go, the OVSDB client) off
// the terminal unless -v asks for them: antctl's output is its answer.
func (o *options) setUpLogging() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if o.verbosity > 0 {
		_ = fs.Set("v", fmt.Sprint(o.verbosity))
		klog.SetOutput(o.env.Err)
		return
	}
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// errNotLocal says a command needs the agent container.
var errNotLocal = errors.New("not in local mode")

// agentConfig reads the agent's conf file of local mode; errNotLocal when
// there is none (antctl does not run inside the agent container).
func (o *options) agentConfig() (*agentconfig.AgentConfig, error) {
	path := filepath.Join(o.configDir, agentconfig.FileName)
	c, err := agentconfig.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotLocal
	}
	if err != nil {
		return nil, fmt.Errorf("local mode: %w", err)
	}
	return c, nil
}

// local reports whether antctl runs in local mode.
func (o *options) local() bool {
	_, err := os.Stat(filepath.Join(o.configDir, agentconfig.FileName))
	return err == nil
}

// kubeconfigGiven reports whether the user named a kubeconfig (flag or
// $KUBECONFIG) or a server: then it wins over local mode's connection.
func (o *options) kubeconfigGiven() bool {
	return o.loading.ExplicitPath != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" ||
		o.overrides.ClusterInfo.Server != ""
}

// restConfig is kube-apiserver's client configuration: from the kubeconfig
// flags, or in local mode without them, the agent's own (its conf file's
// clientConnection.kubeconfig and kubeAPIServerOverride over the in-cluster
// config), which works where the kubernetes Service does not.
func (o *options) restConfig() (*rest.Config, error) {
	if !o.kubeconfigGiven() {
		c, err := o.agentConfig()
		switch {
		case err == nil:
			cfg, err := config.KubeRESTConfig(c.ClientConnection.Kubeconfig, c.KubeAPIServerOverride, userAgent)
			if err != nil {
				return nil, fmt.Errorf("local mode: %w", err)
			}
			return cfg, nil
		case !errors.Is(err, errNotLocal):
			return nil, err
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, o.overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("no kubeconfig (give --kubeconfig, set $KUBECONFIG or write ~/.kube/config), and not in local mode (no %s)",
			filepath.Join(o.configDir, agentconfig.FileName))
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// getClients builds the API clients once per run.
func (o *options) getClients() (*Clients, error) {
	if o.clients != nil {
		return o.clients, nil
	}
	if o.env.Clients != nil {
		c, err := o.env.Clients()
		if err != nil {
			return nil, err
		}
		o.clients = c
		return c, nil
	}
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	if o.clients, err = query.NewClients(cfg); err != nil {
		return nil, err
	}
	return o.clients, nil
}

// namespace returns -n, or the kubeconfig context's namespace ("default"
// without one, and in local mode), and whether -n was given.
func (o *options) namespace() (string, bool) {
	if ns := o.overrides.Context.Namespace; ns != "" {
		return ns, true
	}
	if o.kubeconfigGiven() || !o.local() {
		if ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, o.overrides).Namespace(); err == nil && ns != "" {
			return ns, false
		}
	}
	return defaultNamespace, false
}
