package antctl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// Local mode: this node's OVS, read through the sockets the agent uses
// (ovsRunDir of its conf file: ovsdb-server's db.sock and the bridge's
// <bridge>.mgmt OpenFlow socket).

// localTimeout bounds one local read (OVSDB or OpenFlow).
const localTimeout = 15 * time.Second

// localNode is this node's OVS as the agent's conf file describes it.
type localNode struct {
	conf *agentconfig.AgentConfig
	// remote, when set, reads another node through its agent API
	// (agentapi.go) instead of local sockets.
	remote *agentClient
}

// requireLocal returns the local node, or for a laptop the one-line error
// that says how to run the command where it works: in the agent container
// (of the pod's node, when -p names a pod antctl can find).
func (o *options) requireLocal(cmd *cobra.Command, podNS, pod string) (*localNode, error) {
	c, err := o.agentConfig()
	if err == nil {
		return &localNode{conf: c}, nil
	}
	if !errors.Is(err, errNotLocal) {
		return nil, err
	}
	how := localModeHowTo + " " + replayArgs(cmd)
	if target := o.agentPodFor(cmd.Context(), podNS, pod); target != "" {
		how = strings.Replace(how, "ds/"+agentDaemonSet, target, 1)
	}
	return nil, fmt.Errorf("%s reads a node's OVS and needs local mode (there is no %s here): run it in the antrea-agent container: %s (the agent API that will serve it remotely is a later step)",
		strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), filepath.Join(o.configDir, agentconfig.FileName), how)
}

// replayArgs is the command line of cmd without the flags that only matter
// from a laptop (kubeconfig and the like): what to run in the agent container.
func replayArgs(cmd *cobra.Command) string {
	parts := []string{strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if cmd.LocalFlags().Lookup(f.Name) == nil && f.Name != clientcmd.FlagNamespace && f.Name != "output" {
			return
		}
		if f.Shorthand != "" {
			parts = append(parts, "-"+f.Shorthand, f.Value.String())
		} else {
			parts = append(parts, "--"+f.Name, f.Value.String())
		}
	})
	return strings.Join(parts, " ")
}

// agentPodFor names the antrea-agent pod on the node of pod ns/name ("" when
// antctl cannot tell).
func (o *options) agentPodFor(ctx context.Context, ns, name string) string {
	if name == "" {
		return ""
	}
	c, err := o.getClients()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.Spec.NodeName == "" {
		return ""
	}
	agents, err := c.Kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{componentLabel: agentDaemonSet}.String(),
		FieldSelector: "spec.nodeName=" + p.Spec.NodeName,
	})
	if err != nil {
		return ""
	}
	for _, a := range agents.Items {
		if a.Spec.NodeName == p.Spec.NodeName {
			return a.Name
		}
	}
	return ""
}

func (l *localNode) dbEndpoint() string {
	return "unix:" + filepath.Join(l.conf.OVSRunDir, "db.sock")
}

func (l *localNode) mgmtSocket() string {
	return filepath.Join(l.conf.OVSRunDir, l.conf.OVSBridge+".mgmt")
}

// withOVSDB runs f on a connection to this node's ovsdb-server.
func (l *localNode) withOVSDB(ctx context.Context, f func(*ovsconfig.Connection) error) error {
	ctx, cancel := context.WithTimeout(ctx, localTimeout)
	defer cancel()
	conn, err := ovsconfig.Connect(ctx, l.dbEndpoint())
	if err != nil {
		return fmt.Errorf("local mode: %w", err)
	}
	defer conn.Close()
	return f(conn)
}

// interfaces reads the interfaces the agent recorded in OVSDB: the ports of
// the bridge with their external_ids, as the agent rebuilds its interface
// store at start.
func (l *localNode) interfaces(ctx context.Context) (interfacestore.InterfaceStore, error) {
	if l.remote != nil {
		return l.remote.interfaces(ctx)
	}
	store := interfacestore.NewInterfaceStore()
	err := l.withOVSDB(ctx, func(conn *ovsconfig.Connection) error {
		br := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: l.conf.OVSBridge})
		ports, err := br.GetPortList(ctx)
		if err != nil {
			return fmt.Errorf("local mode: ports of %s: %w", l.conf.OVSBridge, err)
		}
		store.Initialize(interfacestore.InterfaceConfigsFromOVSPorts(ports))
		return nil
	})
	return store, err
}

// ovsVersion reads ovs_version from OVSDB.
func (l *localNode) ovsVersion(ctx context.Context) (string, error) {
	var v string
	err := l.withOVSDB(ctx, func(conn *ovsconfig.Connection) error {
		var err error
		v, err = conn.GetOVSVersion(ctx)
		return err
	})
	return v, err
}

// dumpFlows reads the flows of one table (openflow.TableAll: every table)
// from the bridge, with their counters.
func (l *localNode) dumpFlows(ctx context.Context, table uint8) ([]openflow.FlowStats, error) {
	if l.remote != nil {
		return l.remote.dumpFlows(ctx, table)
	}
	var flows []openflow.FlowStats
	err := l.withOpenFlow(ctx, func(ctx context.Context, conn *openflow.Conn) error {
		var err error
		if flows, err = conn.DumpFlows(ctx, openflow.FlowStatsRequest{TableID: table}); err != nil {
			return fmt.Errorf("local mode: dump-flows %s: %w", l.conf.OVSBridge, err)
		}
		return nil
	})
	return flows, err
}

// withOpenFlow runs f on a connection to the bridge's OpenFlow socket.
func (l *localNode) withOpenFlow(ctx context.Context, f func(context.Context, *openflow.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, localTimeout)
	defer cancel()
	conn, err := openflow.Dial(ctx, l.mgmtSocket(), openflow.Options{})
	if err != nil {
		return fmt.Errorf("local mode: %w", err)
	}
	defer conn.Close()
	return f(ctx, conn)
}

// errNoGroupsRemotely: the agent API serves flows, not groups.
var errNoGroupsRemotely = errors.New("the agent API serves no OVS groups")

// dumpGroups reads the bridge's groups (openflow.GroupIDAll: every group).
func (l *localNode) dumpGroups(ctx context.Context, group uint32) ([]openflow.GroupDesc, error) {
	if l.remote != nil {
		return nil, fmt.Errorf("%w: run it in the antrea-agent container: %s", errNoGroupsRemotely, l.remote.how)
	}
	var groups []openflow.GroupDesc
	err := l.withOpenFlow(ctx, func(ctx context.Context, conn *openflow.Conn) error {
		var err error
		if groups, err = conn.GroupDesc(ctx, group); err != nil {
			return fmt.Errorf("local mode: dump-groups %s: %w", l.conf.OVSBridge, err)
		}
		return nil
	})
	return groups, err
}

// pipeline is the table layout the agent lays out at start: antctl asks
// pkg/agent/openflow for it (a client that writes nothing) rather than keep
// a table list of its own.
func pipeline() (*agentof.Pipeline, error) {
	c, err := agentof.NewClient(nil, 0)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return c.Pipeline(), nil
}

// lookupTable finds a table by name (any case) or number; an unknown one is
// the one-line error with the closest name.
func lookupTable(p *agentof.Pipeline, name string) (*agentof.Table, error) {
	if t, ok := p.Lookup(name); ok {
		return t, nil
	}
	var names []string
	for _, t := range p.Tables() {
		if strings.EqualFold(t.Name, name) || fmt.Sprint(t.ID) == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return nil, fmt.Errorf("unknown table %q%s; the tables are %s", name, didYouMean(name, names), strings.Join(names, ", "))
}

// podInterfaces returns the interfaces of pod ns/name, or the one-line error
// naming the pods this node does have (with the closest to name).
func podInterfaces(store interfacestore.InterfaceStore, ns, name string) ([]*interfacestore.InterfaceConfig, error) {
	if ifs := store.GetContainerInterfacesByPod(name, ns); len(ifs) > 0 {
		return ifs, nil
	}
	var inNS, namespaces []string
	seenNS := map[string]bool{}
	for _, i := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if i.PodNamespace == ns {
			inNS = append(inNS, i.PodName)
		}
		if !seenNS[i.PodNamespace] {
			seenNS[i.PodNamespace] = true
			namespaces = append(namespaces, i.PodNamespace)
		}
	}
	sort.Strings(namespaces)
	if len(inNS) == 0 {
		return nil, fmt.Errorf("no pod of namespace %q has an interface on this node%s", ns, didYouMean(ns, namespaces))
	}
	return nil, fmt.Errorf("pod %q of namespace %s has no interface on this node%s", name, ns, didYouMean(name, inNS))
}
