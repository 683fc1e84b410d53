package antctl

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/supportbundle"
)

// What upstream antctl's flags do here, run against the fake cluster.

// bundleCluster is the default cluster with the agent and controller pods,
// whose agents answer antctl supportbundle --local through exec (or block
// until the context ends, when hang is set).
func bundleCluster(t *testing.T, hang bool) (*cluster, *[]string) {
	t.Helper()
	c := defaultCluster()
	c.Pods = append(c.Pods, bundlePod("antrea-agent-a", agentDaemonSet, "node-1"), bundlePod("antrea-agent-b", agentDaemonSet, "node-2"),
		bundlePod("antrea-controller-x", controllerName, "node-1"))
	var execs []string
	saved := execInPod
	t.Cleanup(func() { execInPod = saved })
	execInPod = func(*options) podExec {
		return func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
			execs = append(execs, pod+": "+strings.Join(argv, " "))
			if hang {
				<-ctx.Done()
				return ctx.Err()
			}
			col := &supportbundle.Collector{Component: "antrea-agent", Node: pod, Version: "v9.9.9"}
			_, err := col.Collect(ctx, stdout)
			return err
		}
	}
	return c, &execs
}

// bundleFiles lists the tarballs a run wrote.
func bundleFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m {
		out = append(out, filepath.Base(f))
	}
	sort.Strings(out)
	return out
}

func TestSupportBundleSelectsComponentsAsUpstreamAntctl(t *testing.T) {
	list := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(list, []byte("node-2\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no filter: the controller and every agent", nil, []string{"agent-node-1.tar.gz", "agent-node-2.tar.gz", "controller.tar.gz"}},
		{"a node name: that agent only", []string{"node-2"}, []string{"agent-node-2.tar.gz"}},
		{"a pattern: the agents of the nodes it matches", []string{"node-*"}, []string{"agent-node-1.tar.gz", "agent-node-2.tar.gz"}},
		{"-l: the agents of the selected nodes", []string{"-l", "pool=a"}, []string{"agent-node-1.tar.gz"}},
		{"-f: the agents of the nodes the file names", []string{"-f", list}, []string{"agent-node-2.tar.gz"}},
		{"--controller-only", []string{"--controller-only"}, []string{"controller.tar.gz"}},
		{"--since with a node", []string{"node-1", "--since", "1h"}, []string{"agent-node-1.tar.gz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, argvs := bundleCluster(t, false)
			dir := filepath.Join(t.TempDir(), "sb")
			r := runAntctl(t, c, append([]string{"supportbundle", "-d", dir}, tc.args...)...)
			if r.runErr != nil {
				t.Fatalf("%v\n%s", r.runErr, r.out)
			}
			if got := bundleFiles(t, dir); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("wrote %v, want %v", got, tc.want)
			}
			// The agent's own bundle is cut at --since too (here made by exec).
			for _, argv := range *argvs {
				if slices.Contains(tc.args, "--since") != strings.Contains(argv, "--since 1h0m0s") {
					t.Errorf("exec %q for antctl %v", argv, tc.args)
				}
			}
		})
	}
	c, _ := bundleCluster(t, false)
	for args, want := range map[string]string{
		"supportbundle nod-2":            `node "nod-2" not found (did you mean "node-2"?)`,
		"supportbundle node-2 -l pool=a": `node "node-2" not found among the Nodes of -l pool=a`,
		"supportbundle -l pool=c":        "no Node matches -l pool=c",
		"supportbundle --local node-1":   "--local makes this node's bundle: it takes no node filter and no --controller-only",
	} {
		r := runAntctl(t, c, append(strings.Fields(args), "-d", t.TempDir())...)
		if r.runErr == nil || !strings.HasPrefix(r.runErr.Error(), want) {
			t.Errorf("antctl %s: error %v, want %q", args, r.runErr, want)
		}
	}
}

// -t bounds the whole command, as upstream's: an agent that never answers
// is given up at the deadline and named.
func TestTimeoutBoundsTheWholeCommand(t *testing.T) {
	c, execs := bundleCluster(t, true)
	dir := t.TempDir()
	r := runAntctl(t, c, "-t", "300ms", "supportbundle", "node-1", "-d", dir)
	if r.runErr == nil || !strings.Contains(r.out, "context deadline exceeded") || len(*execs) != 1 {
		t.Fatalf("error %v, execs %v, output\n%s\nwant node-1's agent given up at the deadline", r.runErr, *execs, r.out)
	}
}

// -k names the kubeconfig, as --kubeconfig does.
func TestShortKubeconfigFlagNamesTheFile(t *testing.T) {
	var out, errb bytes.Buffer
	cmd := NewCommand(Env{Out: &out, Err: &errb})
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	cmd.SetArgs([]string{"-k", missing, "--config-dir", t.TempDir(), "get", "networkpolicy"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %v, want one naming %s", err, missing)
	}
}

func TestTraceflowNowaitLeavesTheTraceflow(t *testing.T) {
	var created []*crdv1beta1.Traceflow
	cl := traceflowClients(crdv1beta1.TraceflowStatus{}, &created)
	r := runAntctlWith(t, cl, "traceflow", "-S", "demo/client", "-D", "demo/web-0", "--nowait")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	l, err := cl.Antrea.CrdV1beta1().Traceflows().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || len(created) != 1 {
		t.Fatalf("--nowait: %v, %d Traceflows left, want the one created", err, len(l.Items))
	}
	if name := l.Items[0].Name; !strings.Contains(r.out, "Traceflow "+name+" created") {
		t.Errorf("output %q does not name Traceflow %s", r.out, name)
	}
}

// acnpWeb is an Antrea ClusterNetworkPolicy of the securityops Tier applied
// to the web pods.
var acnpWeb = &cpv1beta2.NetworkPolicy{
	ObjectMeta:      metav1.ObjectMeta{Name: "uid-zz-acnp-web", Generation: 10},
	SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "zz-web-ops"},
	TierPriority:    ptrInt32(100),
	Priority:        ptrFloat(5),
	AppliedToGroups: []string{atgWeb.Name},
	Rules:           []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn}},
}

func ptrInt32(v int32) *int32     { return &v }
func ptrFloat(v float64) *float64 { return &v }
func firstColumn(out string) []string {
	var names []string
	for _, r := range rows(out)[1:] {
		names = append(names, r[0])
	}
	return names
}

func TestPolicyFiltersOfUpstreamAntctl(t *testing.T) {
	c := defaultCluster()
	c.Policies = append(c.Policies, acnpWeb)
	c.Realized[acnpWeb.Name] = "2/2"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"by name, without a filter", []string{"get", "networkpolicy"}, []string{npWeb.Name, npClient.Name, npOther.Name, acnpWeb.Name}},
		{"-T keeps one type of source", []string{"get", "networkpolicy", "-T", "ACNP"}, []string{acnpWeb.Name}},
		{"-T takes any case", []string{"get", "networkpolicy", "-T", "k8snp", "-n", "default"}, []string{npOther.Name}},
		{"-S keeps the policies of a source name", []string{"get", "networkpolicy", "-S", "client-egress"}, []string{npClient.Name}},
		{"-p takes NS/POD", []string{"get", "networkpolicy", "-p", "demo/web-1"}, []string{npWeb.Name, acnpWeb.Name}},
		{"--sort-by effectivePriority: Tiers first, K8s NetworkPolicies after the application Tier",
			[]string{"get", "networkpolicy", "--sort-by", "effectivePriority"}, []string{acnpWeb.Name, npWeb.Name, npClient.Name, npOther.Name}},
		{"--sort-by a JSONPath, numbers as numbers, ties by name", []string{"get", "networkpolicy", "--sort-by", ".metadata.generation"},
			[]string{npWeb.Name, npOther.Name, npClient.Name, acnpWeb.Name}},
		{"--sort-by on groups", []string{"get", "appliedtogroup", "--sort-by", "{.groupMembers[0].pod.namespace}"},
			[]string{atgOther.Name, atgClient.Name, atgWeb.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAntctl(t, c, tc.args...)
			if r.runErr != nil {
				t.Fatalf("%v\n%s", r.runErr, r.err)
			}
			if got := firstColumn(r.out); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("antctl %s listed %v, want %v", strings.Join(tc.args, " "), got, tc.want)
			}
		})
	}
	r := runAntctl(t, c, "get", "networkpolicy", "-T", "KNP")
	if r.runErr == nil || r.runErr.Error() != `unknown policy type "KNP"; want one of ACNP, ANNP, ANP, BANP, K8sNP` {
		t.Errorf("-T KNP: %v", r.runErr)
	}
}

func TestOVSFlowsTableNamesOnlyListsThePipeline(t *testing.T) {
	r := runAntctl(t, nil, "get", "ovsflows", "--table-names-only")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	c, err := agentof.NewClient(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tb := range c.Pipeline().Tables() {
		want = append(want, tb.Name)
	}
	if got := strings.Fields(r.out); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("--table-names-only printed %v, want the pipeline's %v", got, want)
	}
	r = runAntctl(t, nil, "get", "ovsflows", "--type", "ACNP")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), "--type narrows -N/--networkpolicy") {
		t.Errorf("--type without -N: %v", r.runErr)
	}
}

func TestCheckInstallationRunAndNamespaceOfUpstreamAntctl(t *testing.T) {
	c := newCheckCluster(t)
	saved := execInPod
	defer func() { execInPod = saved }()
	execInPod = func(*options) podExec { return c.exec }
	r := runAntctlWith(t, &Clients{Kube: c.kube}, "check", "installation", "--connect-timeout", "1s", "-t", "10s", "--run", "networkpolicy")
	if r.runErr != nil {
		t.Fatalf("%v\n%s%s", r.runErr, r.out, r.err)
	}
	got := verdictsOf(t, r.out)
	if len(got) != 2 || got["networkpolicy-deny"] != verdictPass || got["networkpolicy-allow"] != verdictPass {
		t.Errorf("--run networkpolicy ran %v, want the two policy checks, passing", got)
	}
	r = runAntctlWith(t, &Clients{Kube: c.kube}, "check", "installation", "-n", "antrea")
	if r.runErr == nil || r.runErr.Error() != "no antrea-agent DaemonSet in Namespace antrea: is Antrea installed there? (-n names its Namespace)" {
		t.Errorf("-n antrea: %v", r.runErr)
	}
	r = runAntctlWith(t, &Clients{Kube: c.kube}, "check", "installation", "--run", "dns")
	if r.runErr == nil || !strings.HasPrefix(r.runErr.Error(), `--run "dns" selects no check; the checks are`) {
		t.Errorf("--run dns: %v", r.runErr)
	}
}

// -v alone is upstream's "enable verbose output": every log line; a level
// is --verbose=N or kubectl's --v=N.
func TestVerboseAloneLogsEverything(t *testing.T) {
	for args, want := range map[string]string{"-v": strconv.Itoa(allLogs), "--verbose=3": "3", "--v=2": "2", "": "0"} {
		root := NewCommand(Env{})
		c, rest, err := root.Find(append(strings.Fields(args), "version"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := c.Flags().Lookup("verbose").Value.String(); got != want {
			t.Errorf("antctl %s version: log level %s, want %s", args, got, want)
		}
	}
}
