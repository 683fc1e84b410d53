package antctl

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// upstreamFlag is one flag of upstream antctl's command: its long name and
// short form, and, when this antctl lacks it, why.
type upstreamFlag struct {
	name, short string
	// missing says why this antctl has no such flag; "" when it must have it.
	missing string
	// shortTaken says why this antctl's flag has no short form: a global
	// flag of this antctl has it.
	shortTaken string
}

// upstreamCommand is a command of upstream antctl (antrea-io/antrea) with
// its flags, as its source declares them.
type upstreamCommand struct {
	// path is the command line, "" for the root's persistent flags.
	path string
	// source is the upstream file that declares the flags.
	source string
	flags  []upstreamFlag
	// aliases are the command's other names upstream.
	aliases []string
	// args are arguments upstream takes (a NAME, node names).
	args []string
	// missing says why this antctl has no such command; "" when it must have it.
	missing string
}

// upstreamAntctl is upstream antctl's commands and flags, written from its
// source (antrea-io/antrea main, pkg/antctl). Commands built from the
// CommandList (pkg/antctl/antctl.go) get -o/--output from
// pkg/antctl/command_definition.go (applyFlagsToCommand) and their params
// from antctl.go; the raw commands declare their own in
// pkg/antctl/raw/<name>/command.go. Where upstream runs in two modes (in
// the agent, or against the controller from a laptop) the flags are the
// union: this antctl is one program in both places.
var upstreamAntctl = []upstreamCommand{
	{path: "", source: "pkg/antctl/command_list.go (applyPersistentFlagsToRoot)", flags: []upstreamFlag{
		{name: "verbose", short: "v"}, {name: "kubeconfig", short: "k"}, {name: "timeout", short: "t"}, {name: "server", short: "s"},
	}},
	{path: "version", source: "pkg/antctl/antctl.go, command_definition.go", flags: []upstreamFlag{{name: "output", short: "o"}}},
	{path: "get networkpolicy", source: "pkg/antctl/antctl.go (\"networkpolicy\", getSortByFlag)", aliases: []string{"networkpolicies", "netpol"}, args: []string{"NAME"}, flags: []upstreamFlag{
		{name: "source", short: "S"}, {name: "namespace", short: "n"}, {name: "pod", short: "p"}, {name: "type", short: "T"},
		{name: "sort-by"}, {name: "output", short: "o"},
	}},
	{path: "get appliedtogroup", source: "pkg/antctl/antctl.go (\"appliedtogroup\")", aliases: []string{"appliedtogroups", "atg"}, args: []string{"NAME"}, flags: []upstreamFlag{
		{name: "sort-by"}, {name: "output", short: "o"},
	}},
	{path: "get addressgroup", source: "pkg/antctl/antctl.go (\"addressgroup\")", aliases: []string{"addressgroups", "ag"}, args: []string{"NAME"}, flags: []upstreamFlag{
		{name: "sort-by"}, {name: "output", short: "o"},
	}},
	{path: "get podinterface", source: "pkg/antctl/antctl.go (\"podinterface\")", aliases: []string{"podinterfaces", "pi"}, args: []string{"NAME"}, flags: []upstreamFlag{
		{name: "namespace", short: "n"}, {name: "output", short: "o"},
	}},
	{path: "get ovsflows", source: "pkg/antctl/antctl.go (\"ovsflows\")", aliases: []string{"of"}, flags: []upstreamFlag{
		{name: "namespace", short: "n"}, {name: "pod", short: "p"}, {name: "networkpolicy", short: "N"}, {name: "type"},
		{name: "table", short: "T"}, {name: "table-names-only"}, {name: "output", short: "o"},
		{name: "service", short: "S", missing: "which flows serve a Service is AntreaProxy's in-memory record; pkg/agent/openflow is being re-cut into feature plug-ins that report what they installed (issue 35 item 1), which will serve it"},
		{name: "groups", short: "G"},
	}},
	{path: "get featuregates", source: "pkg/antctl/raw/featuregates/command.go", flags: []upstreamFlag{{name: "insecure"}}},
	{path: "query endpoint", source: "pkg/antctl/antctl.go (\"endpoint\")", aliases: []string{"endpoints"}, flags: []upstreamFlag{
		{name: "namespace", short: "n"}, {name: "pod", short: "p"}, {name: "output", short: "o"},
	}},
	{path: "traceflow", source: "pkg/antctl/raw/traceflow/command.go", aliases: []string{"tf", "traceflows"}, flags: []upstreamFlag{
		{name: "source", short: "S"}, {name: "destination", short: "D"}, {name: "output", short: "o"}, {name: "flow", short: "f"},
		{name: "live-traffic", short: "L"}, {name: "dropped-only"}, {name: "nowait"}, {name: "timeout", short: "t"},
	}},
	{path: "supportbundle", source: "pkg/antctl/raw/supportbundle/command.go", args: []string{"node-1", "*worker*"}, flags: []upstreamFlag{
		{name: "dir", short: "d"}, {name: "label-selector", short: "l"}, {name: "controller-only"},
		{name: "node-list-file", short: "f"}, {name: "insecure"},
		{name: "since"},
	}},
	{path: "check cluster", source: "pkg/antctl/raw/check/cluster/command.go", flags: []upstreamFlag{{name: "test-image"}}},
	{path: "check installation", source: "pkg/antctl/raw/check/installation/command.go", flags: []upstreamFlag{
		{name: "namespace", short: "n"}, {name: "run"}, {name: "test-image"},
	}},
	// Upstream's commands for what this Antrea does not have (yet).
	{path: "get agentinfo", source: "pkg/antctl/antctl.go (\"agentinfo\")", aliases: []string{"agentinfos", "ai"}, flags: []upstreamFlag{{name: "output", short: "o"}}},
	{path: "get controllerinfo", source: "pkg/antctl/antctl.go (\"controllerinfo\")", aliases: []string{"controllerinfos", "ci"}, flags: []upstreamFlag{{name: "output", short: "o"}}},
	{path: "log-level", source: "pkg/antctl/antctl.go", missing: "the components serve no /loglevel"},
	{path: "trace-packet", source: "pkg/antctl/antctl.go", missing: "no ofproto/trace endpoint in the agent API"},
	{path: "query networkpolicyevaluation", source: "pkg/antctl/antctl.go", missing: "the controller serves no NetworkPolicyEvaluation"},
	{path: "get podmulticaststats", source: "pkg/antctl/antctl.go (\"podmulticaststats\")", flags: []upstreamFlag{{name: "output", short: "o"}}},
	{path: "get flowrecords", source: "pkg/antctl/antctl.go", missing: "no flow aggregator"},
	{path: "get recordmetrics", source: "pkg/antctl/antctl.go", missing: "no flow aggregator"},
	{path: "get serviceexternalip", source: "pkg/antctl/antctl.go", missing: "no ServiceExternalIP"},
	{path: "get memberlist", source: "pkg/antctl/antctl.go", missing: "no memberlist (Egress, ServiceExternalIP)"},
	{path: "get bgppolicy", source: "pkg/antctl/antctl.go (\"bgppolicy\")", flags: []upstreamFlag{{name: "output", short: "o"}}},
	{path: "get bgppeers", source: "pkg/antctl/antctl.go (\"bgppeers\")", aliases: []string{"bgppeer"}, flags: []upstreamFlag{
		{name: "ipv4-only"}, {name: "ipv6-only"}, {name: "output", short: "o"}}},
	{path: "get bgproutes", source: "pkg/antctl/antctl.go (\"bgproutes\")", aliases: []string{"bgproute"}, flags: []upstreamFlag{
		{name: "ipv4-only"}, {name: "ipv6-only"}, {name: "type", short: "T"}, {name: "output", short: "o"}}},
	{path: "get fqdncache", source: "pkg/antctl/antctl.go (\"fqdncache\")", flags: []upstreamFlag{{name: "domain", short: "d"}, {name: "output", short: "o"}}},
	{path: "packetcapture", source: "pkg/antctl/raw/packetcapture/command.go", aliases: []string{"pc", "packetcaptures"}, flags: []upstreamFlag{
		{name: "source", short: "S"}, {name: "destination", short: "D"}, {name: "flow", short: "f"},
		{name: "number", short: "n", shortTaken: "-n is the global --namespace here (kubectl's)"},
		{name: "capture-point", short: "p"}, {name: "nowait"}, {name: "output-dir", short: "o"}, {name: "direction", short: "d"},
		{name: "timeout", short: "t"},
	}},
	{path: "proxy", source: "pkg/antctl/raw/proxy/command.go", missing: "no proxy to the components' APIs yet"},
	{path: "mc", source: "pkg/antctl/raw/multicluster/commands.go", missing: "no Multi-cluster"},
	{path: "set", source: "pkg/antctl/antctl.go (set.SetCmd)", missing: "no flow aggregator"},
	{path: "upgrade", source: "pkg/antctl/raw/upgrade/apistorage", missing: "no stored API versions to migrate"},
}

// findCommand finds the command of a command line, nil when there is none.
func findCommand(root *cobra.Command, path string) *cobra.Command {
	if path == "" {
		return root
	}
	c, rest, err := root.Find(strings.Fields(path))
	if err != nil || len(rest) > 0 || c == root {
		return nil
	}
	return c
}

// lookupFlag finds a flag of cmd by name, its own or inherited from a parent.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	return findFlag(cmd, func(fs *pflag.FlagSet) *pflag.Flag { return fs.Lookup(name) })
}

// lookupShort finds the flag of a short form, its own or inherited.
func lookupShort(cmd *cobra.Command, short string) *pflag.Flag {
	return findFlag(cmd, func(fs *pflag.FlagSet) *pflag.Flag { return fs.ShorthandLookup(short) })
}

func findFlag(cmd *cobra.Command, find func(*pflag.FlagSet) *pflag.Flag) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()} {
		if f := find(fs); f != nil {
			return f
		}
	}
	return nil
}

// flagList is a command's flags as "--name/-s" (hidden ones left out), for
// the test's log.
func flagList(cmd *cobra.Command) string {
	seen := map[string]bool{}
	var out []string
	add := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		s := "--" + f.Name
		if f.Shorthand != "" {
			s += "/-" + f.Shorthand
		}
		out = append(out, s)
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestFlagsAreUpstreamAntctls holds every command and flag of upstream
// antctl against this one: a command upstream has exists here (or the
// table says why not) with upstream's aliases, each of its flags exists with
// the same short form,
// and no short form here means another flag than upstream's, so habits and
// scripts written for upstream antctl work.
func TestFlagsAreUpstreamAntctls(t *testing.T) {
	root := NewCommand(Env{})
	for _, uc := range upstreamAntctl {
		name := uc.path
		if name == "" {
			name = "antctl (global flags)"
		}
		t.Run(name, func(t *testing.T) {
			cmd := findCommand(root, uc.path)
			switch {
			case cmd == nil && uc.missing == "":
				t.Fatalf("antctl has no %q, which upstream has (%s)", uc.path, uc.source)
			case cmd == nil:
				t.Skipf("not here: %s", uc.missing)
			case uc.missing != "":
				t.Fatalf("antctl has %q now: remove %q from the table and list its flags (%s)", uc.path, uc.missing, uc.source)
			}
			t.Logf("%s: %s", cmd.CommandPath(), flagList(cmd))
			if len(uc.args) > 0 {
				if err := cmd.ValidateArgs(uc.args); err != nil {
					t.Errorf("%s does not take %q as upstream does: %v", cmd.CommandPath(), uc.args, err)
				}
			}
			for _, a := range uc.aliases {
				if !slices.Contains(cmd.Aliases, a) {
					t.Errorf("%s has no alias %q, which upstream has (%s)", cmd.CommandPath(), a, uc.source)
				}
			}
			for _, uf := range uc.flags {
				f := lookupFlag(cmd, uf.name)
				if uf.missing != "" {
					if f != nil {
						t.Errorf("--%s is here now: drop %q from the table (%s)", uf.name, uf.missing, uc.source)
					}
					continue
				}
				if f == nil {
					t.Errorf("%s has no --%s (upstream: %s)", cmd.CommandPath(), uf.name, uc.source)
					continue
				}
				if uf.shortTaken != "" {
					if f.Shorthand != "" {
						t.Errorf("--%s has short form -%s now: drop %q from the table", uf.name, f.Shorthand, uf.shortTaken)
					}
					continue
				}
				if uf.short != "" && f.Shorthand != uf.short {
					t.Errorf("%s --%s has short form %q, upstream -%s (%s)", cmd.CommandPath(), uf.name, f.Shorthand, uf.short, uc.source)
				}
				if uf.short != "" {
					if g := lookupShort(cmd, uf.short); g == nil || g.Name != uf.name {
						t.Errorf("%s -%s is not --%s as upstream's", cmd.CommandPath(), uf.short, uf.name)
					}
				}
			}
			// A short form of ours that upstream gives another flag of this
			// command (or of the root) would run something else.
			upstreamShort := map[string]string{}
			for _, c := range []upstreamCommand{upstreamAntctl[0], uc} {
				for _, uf := range c.flags {
					if uf.short != "" && uf.missing == "" && uf.shortTaken == "" {
						upstreamShort[uf.short] = uf.name
					}
				}
			}
			check := func(f *pflag.Flag) {
				if want, ok := upstreamShort[f.Shorthand]; ok && f.Shorthand != "" && want != f.Name && lookupFlag(cmd, want) != f {
					t.Errorf("%s -%s is --%s here, --%s upstream", cmd.CommandPath(), f.Shorthand, f.Name, want)
				}
			}
			cmd.Flags().VisitAll(check)
			cmd.InheritedFlags().VisitAll(check)
		})
	}
}

// TestUpstreamShortFormsParse runs upstream antctl's own examples (from its
// commands' help) that use short forms: each parses here, so it fails on a
// flag only for what it asks, not as "unknown shorthand flag".
func TestUpstreamShortFormsParse(t *testing.T) {
	for _, args := range [][]string{
		{"supportbundle", "-d", "/tmp/sb"},
		{"supportbundle", "'*worker*'", "-l", "kubernetes.io/os=linux"},
		{"supportbundle", "-f", "/tmp/nodes"},
		{"get", "networkpolicy", "-S", "allow-http", "-n", "ns1"},
		{"get", "networkpolicy", "-T", "acnp"},
		{"get", "networkpolicy", "-p", "ns1/pod1"},
		{"get", "networkpolicy", "--sort-by=effectivePriority"},
		{"get", "ovsflows", "-N", "np1", "-n", "ns1", "--type", "K8sNP"},
		{"get", "ovsflows", "-T", "IngressRule"},
		{"get", "ovsflows", "--table-names-only"},
		{"get", "ovsflows", "-G", "all"},
		{"traceflow", "-S", "pod1", "-D", "svc1", "-f", "tcp", "--live-traffic", "-t", "1m"},
		{"-k", "/tmp/kubeconfig", "-s", "https://127.0.0.1:6443", "-t", "5s", "-v", "version"},
		{"check", "installation", "-n", "kube-system", "--run", "pod-to-pod", "--test-image", "agnhost"},
		{"check", "cluster", "--test-image", "antrea/antrea-agent:latest"},
	} {
		root := NewCommand(Env{})
		c, rest, err := root.Find(args)
		if err != nil {
			t.Errorf("antctl %s: %v", strings.Join(args, " "), err)
			continue
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Errorf("antctl %s: %v", strings.Join(args, " "), err)
		}
	}
}
