package supportbundle

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// AgentOptions say where a node's state is.
type AgentOptions struct {
	Node, Version string
	// ConfigDir holds antrea-agent.conf (and the CNI conf the agent reads).
	ConfigDir string
	Conf      *agentconfig.AgentConfig
	// LogDir is the agent's hostPath log directory (/var/log/antrea), which
	// holds the audit log and, under openvswitch/, OVS's logs.
	LogDir    string
	TailBytes int64
	// InProcess: the collector runs in the agent (its API), so the
	// goroutine and heap profiles are the agent's own.
	InProcess bool
}

// ProfileFuncs write this process's goroutine (with stacks) and heap
// profiles.
func ProfileFuncs() []Func {
	return []Func{
		{Name: "profiles/goroutine.txt", Write: func(_ context.Context, w io.Writer) error {
			return pprof.Lookup("goroutine").WriteTo(w, 2)
		}},
		{Name: "profiles/heap.pb.gz", Write: func(_ context.Context, w io.Writer) error {
			return pprof.Lookup("heap").WriteTo(w, 0)
		}},
	}
}

// AgentCollector collects a node: the agent's conf, logs, the bridge's
// flows and groups, OVSDB, the kernel's network state, firewall rules and
// conntrack counts.
func AgentCollector(o AgentOptions) *Collector {
	conf := o.Conf
	if conf == nil {
		conf = agentconfig.Defaults()
	}
	db := "unix:" + filepath.Join(conf.OVSRunDir, "db.sock")
	mgmt := filepath.Join(conf.OVSRunDir, conf.OVSBridge+".mgmt")
	c := &Collector{
		Component: "antrea-agent", Node: o.Node, Version: o.Version, TailBytes: o.TailBytes,
		LogGlobs: []string{filepath.Join(o.LogDir, "*.log"), filepath.Join(o.LogDir, "*", "*.log")},
		Files: map[string]string{
			"conntrack/nf_conntrack_count.txt": "/proc/sys/net/netfilter/nf_conntrack_count",
			"conntrack/nf_conntrack_max.txt":   "/proc/sys/net/netfilter/nf_conntrack_max",
		},
		Commands: []Command{
			{Name: "network/ip-addr.txt", Argv: []string{"ip", "-d", "addr"}},
			{Name: "network/ip-route.txt", Argv: []string{"ip", "route", "show", "table", "all"}},
			{Name: "network/ip-rule.txt", Argv: []string{"ip", "rule"}},
			{Name: "network/ip-link.txt", Argv: []string{"ip", "-d", "-s", "link"}},
			{Name: "firewall/iptables-save.txt", Argv: []string{"iptables-save", "-c"}},
			{Name: "firewall/nft-ruleset.txt", Argv: []string{"nft", "list", "ruleset"}},
			{Name: "ovs/ovsdb-dump.txt", Argv: []string{"ovsdb-client", "dump", db}},
			{Name: "ovs/ovs-vsctl-show.txt", Argv: []string{"ovs-vsctl", "--db=" + db, "show"}},
		},
		Funcs: []Func{
			{Name: "ovs/flows.txt", Write: func(ctx context.Context, w io.Writer) error { return dumpFlows(ctx, mgmt, w) }},
			{Name: "ovs/groups.txt", Write: func(ctx context.Context, w io.Writer) error { return dumpGroups(ctx, mgmt, w) }},
		},
	}
	// OVS's own conntrack (the netdev datapath's): ovs-appctl on
	// ovs-vswitchd's control socket (ovs-vswitchd.ctl, or .<pid>.ctl),
	// named by path: its pidfile names a PID of the antrea-ovs container,
	// which this container cannot see.
	c.Funcs = append(c.Funcs, Func{Name: "conntrack/ovs-ct-stats.txt", Write: func(ctx context.Context, w io.Writer) error {
		ctl, err := newestFile(filepath.Join(conf.OVSRunDir, "ovs-vswitchd*.ctl"))
		if err != nil {
			return err
		}
		run := c.Run
		if run == nil {
			run = runCommand
		}
		out, err := run(ctx, nil, "ovs-appctl", "-t", ctl, "dpctl/ct-stats-show")
		w.Write(out)
		return err
	}})
	if o.ConfigDir != "" {
		c.ConfigFiles = append(c.ConfigFiles, filepath.Join(o.ConfigDir, agentconfig.FileName))
	}
	if conf.ClientConnection.Kubeconfig != "" {
		c.ConfigFiles = append(c.ConfigFiles, conf.ClientConnection.Kubeconfig)
	}
	if o.InProcess {
		c.Funcs = append(c.Funcs, ProfileFuncs()...)
	}
	return c
}

// newestFile is the most recently modified file matching glob.
func newestFile(glob string) (string, error) {
	matches, err := filepath.Glob(glob)
	if err != nil {
		return "", err
	}
	best, bestTime := "", time.Time{}
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.ModTime().After(bestTime) {
			best, bestTime = m, st.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("no %s: is ovs-vswitchd running?", glob)
	}
	return best, nil
}

// dumpFlows writes the bridge's flows with their counters, one per line.
func dumpFlows(ctx context.Context, mgmt string, w io.Writer) error {
	conn, err := openflow.Dial(ctx, mgmt, openflow.Options{})
	if err != nil {
		return err
	}
	defer conn.Close()
	flows, err := conn.DumpFlows(ctx, openflow.FlowStatsRequest{TableID: openflow.TableAll})
	if err != nil {
		return err
	}
	for i := range flows {
		f := flows[i].Flow
		table := f.Table
		f.Table = 0
		fmt.Fprintf(w, "table=%d, n_packets=%d, n_bytes=%d, duration=%ds, %s\n", table, flows[i].PacketCount,
			flows[i].ByteCount, flows[i].DurationSec, f.String())
	}
	return nil
}

// dumpGroups writes the bridge's groups, one per line, with their counters.
func dumpGroups(ctx context.Context, mgmt string, w io.Writer) error {
	conn, err := openflow.Dial(ctx, mgmt, openflow.Options{})
	if err != nil {
		return err
	}
	defer conn.Close()
	groups, err := conn.GroupDesc(ctx, openflow.GroupIDAll)
	if err != nil {
		return err
	}
	for i := range groups {
		fmt.Fprintln(w, groups[i].String())
	}
	return nil
}

// Handler serves a bundle made by collector(tailBytes) at GET (the query's
// tailBytes, DefaultTailBytes without one; its since, a duration such as 1h,
// leaves out the log files not written for that long): the agent API's
// /supportbundle, whose profiles are then the agent's own.
func Handler(collector func(tailBytes int64) *Collector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		tail := int64(DefaultTailBytes)
		if v := r.URL.Query().Get("tailBytes"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				http.Error(w, "tailBytes: want a positive number of bytes", http.StatusBadRequest)
				return
			}
			tail = n
		}
		var since time.Duration
		if v := r.URL.Query().Get("since"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				http.Error(w, "since: want a positive duration such as 5s, 2m or 3h", http.StatusBadRequest)
				return
			}
			since = d
		}
		col := collector(tail)
		if since > 0 {
			col.LogsSince = time.Now().Add(-since)
		}
		w.Header().Set("Content-Type", "application/gzip")
		if _, err := col.Collect(r.Context(), w); err != nil {
			klog.ErrorS(err, "Support bundle cut short")
		}
	})
}
