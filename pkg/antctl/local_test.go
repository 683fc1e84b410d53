package antctl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/antctl/query/querytest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// node is a real node for the local-mode commands: OVS in its own netns
// (pkg/agent/openflow/bridgetest) with the agent's pipeline, pods whose
// interfaces are recorded in OVSDB as the agent records them, and the conf
// directory of the agent container pointing at its sockets.
type node struct {
	br        *bridgetest.Bridge
	flows     *agentof.Client
	configDir string
	pods      map[string]*bridgetest.Pod // by pod name
	podFlows  map[string][]string        // each pod's flows, as the agent client built them
}

func newNode(t *testing.T) *node {
	br := bridgetest.New(t)
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := c.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf("ovsRunDir: %s\novsBridge: br-int\novsDatapathType: netdev\n", br.Dir())
	if err := os.WriteFile(filepath.Join(dir, "antrea-agent.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &node{br: br, flows: c, configDir: dir, pods: map[string]*bridgetest.Pod{}, podFlows: map[string][]string{}}
}

// addPod wires a pod to br-int, records it in OVSDB as the CNI server does
// and installs its flows; the pod's flows are those the install added.
func (n *node) addPod(t *testing.T, p *corev1.Pod) *bridgetest.Pod {
	bp := n.br.AddPod(t, p.Name, p.Status.PodIP+"/24")
	cfg := interfacestore.NewContainerInterface(bp.HostIF, "c0ffee-"+p.Name, p.Name, p.Namespace, "eth0", bp.MAC, []net.IP{bp.IP}, 0)
	ctx := context.Background()
	conn, err := ovsconfig.Connect(ctx, n.br.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: "br-int"}).SetPortExternalIDs(ctx, bp.HostIF,
		interfacestore.BuildOVSPortExternalIDs(cfg)); err != nil {
		t.Fatal(err)
	}
	before := flowSet(n.flows.Flows())
	if err := n.flows.InstallPodFlows(bp.HostIF, []net.IP{bp.IP}, bp.MAC, bp.OFPort); err != nil {
		t.Fatal(err)
	}
	for _, f := range n.flows.Flows() {
		if s := f.String(); !before[s] {
			n.podFlows[p.Name] = append(n.podFlows[p.Name], s)
		}
	}
	sort.Strings(n.podFlows[p.Name])
	n.pods[p.Name] = bp
	return bp
}

func flowSet(flows []*openflow.Flow) map[string]bool {
	s := map[string]bool{}
	for _, f := range flows {
		s[f.String()] = true
	}
	return s
}

// antctl runs antctl in local mode on this node.
func (n *node) antctl(t *testing.T, c *cluster, args ...string) result {
	t.Helper()
	return runAntctl(t, c, append(args, "--config-dir", n.configDir)...)
}

// statsOut is how a flow's counters and ages look in dump-flows: they
// differ between two dumps, so comparisons leave them out.
var statsOut = regexp.MustCompile(`(duration|idle_age)=[0-9.]+s?, `)

// withoutStats turns dump-flows lines into the --no-stats form, sorted.
func withoutStats(out string) []string {
	var res []string
	for _, l := range strings.Split(out, "\n") {
		l = statsOut.ReplaceAllString(strings.TrimSpace(l), "")
		l = regexp.MustCompile(`n_packets=\d+, n_bytes=\d+, `).ReplaceAllString(l, "")
		l = strings.Replace(l, "table=0, ", "", 1)
		l = strings.Replace(l, "cookie=0x0, ", "", 1)
		if l != "" {
			res = append(res, l)
		}
	}
	sort.Strings(res)
	return res
}

func TestOVSFlowsPrintsWhatOVSHolds(t *testing.T) {
	n := newNode(t)
	n.addPod(t, web0)
	n.addPod(t, client)
	ofctl := func(args ...string) string {
		out, err := n.br.Ofctl("dump-flows", "br-int", args...)
		if err != nil {
			t.Fatal(err)
		}
		// antctl prints the flow lines, not the reply's header.
		return regexp.MustCompile(`(?m)^OFPST_FLOW reply.*\n`).ReplaceAllString(out, "")
	}
	classifier, _ := n.flows.Pipeline().Lookup("Classifier")

	t.Run("-T keeps one table, by name or number", func(t *testing.T) {
		want := withoutStats(ofctl(fmt.Sprintf("table=%d", classifier.ID)))
		for _, arg := range []string{"Classifier", "classifier", fmt.Sprint(classifier.ID)} {
			r := n.antctl(t, nil, "get", "ovsflows", "-T", arg)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			if got := withoutStats(r.out); len(got) == 0 || !slices.Equal(got, want) {
				t.Errorf("-T %s printed\n%s\nwant table %d's flows\n%s", arg, r.out, classifier.ID, strings.Join(want, "\n"))
			}
		}
	})
	t.Run("-p keeps the pod's flows", func(t *testing.T) {
		r := n.antctl(t, nil, "get", "ovsflows", "-p", web0.Name, "-n", web0.Namespace)
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		if got := withoutStats(r.out); !slices.Equal(got, n.podFlows[web0.Name]) {
			t.Errorf("-p %s printed\n%s\nwant the flows installed for it\n%s", web0.Name, strings.Join(got, "\n"), strings.Join(n.podFlows[web0.Name], "\n"))
		}
		r = n.antctl(t, nil, "get", "ovsflows", "-p", client.Name, "-n", client.Namespace, "-T", "Classifier")
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		var want []string
		for _, f := range n.podFlows[client.Name] {
			if strings.Contains(f, fmt.Sprintf("table=%d,", classifier.ID)) {
				want = append(want, f)
			}
		}
		if got := withoutStats(r.out); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("-p %s -T Classifier printed\n%s\nwant\n%s", client.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("-o json gives each flow with its table's name", func(t *testing.T) {
		r := n.antctl(t, nil, "get", "ovsflows", "-T", "Classifier", "-o", "json")
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		if !strings.Contains(r.out, `"tableName": "Classifier"`) || !strings.Contains(r.out, `"flow": "`) {
			t.Errorf("-o json printed %s", r.out)
		}
	})
	t.Run("an unknown pod or namespace names what this node has", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"-p", "web-9", "-n", "demo"}, `pod "web-9" of namespace demo has no interface on this node (did you mean "web-0"?)`},
			{[]string{"-p", "web-0", "-n", "dmeo"}, `no pod of namespace "dmeo" has an interface on this node (did you mean "demo"?)`},
		} {
			r := n.antctl(t, nil, append([]string{"get", "ovsflows"}, tc.args...)...)
			if r.runErr == nil || r.runErr.Error() != tc.want {
				t.Errorf("get ovsflows %s: error %v, want %q", strings.Join(tc.args, " "), r.runErr, tc.want)
			}
		}
	})
	t.Run("every flow, as ovs-ofctl prints it with its counters", func(t *testing.T) {
		// Services give the dump the rest of the agent's vocabulary: groups,
		// learn (session affinity), ct with nat, controller (reject).
		ep := agentof.Endpoint{IP: netip.MustParseAddr(web0.Status.PodIP), Port: 8080, Local: true}
		if err := n.flows.InstallService(context.Background(), "demo/web", agentof.ServiceState{
			{IP: netip.MustParseAddr("10.96.0.10"), Protocol: 6, Port: 80}:  {Endpoints: []agentof.Endpoint{ep}, AffinityTimeout: 600},
			{IP: netip.MustParseAddr("10.96.0.11"), Protocol: 17, Port: 53}: {NoEndpoints: agentof.Reject},
		}); err != nil {
			t.Fatal(err)
		}
		// Traffic, so counters are not all zero.
		bridgetest.Run(t, "ip", "netns", "exec", n.pods[web0.Name].NS, "ping", "-c", "2", "-i", "0.2", "-W", "2", client.Status.PodIP)
		// A packet between two dumps (a neighbour solicitation) moves a
		// counter: compare with ovs-ofctl's dumps taken just before and
		// after antctl's, once those two agree.
		var r result
		var want string
		for try := 0; try < 5; try++ {
			before := ofctl()
			r = n.antctl(t, nil, "get", "ovsflows")
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			want = ofctl()
			if statsOut.ReplaceAllString(before, "") == statsOut.ReplaceAllString(want, "") {
				break
			}
		}
		if !regexp.MustCompile(`n_packets=[1-9]`).MatchString(r.out) {
			t.Errorf("no flow counted the pings:\n%s", r.out)
		}
		// Counters and the flow text are exact; durations and ages move.
		if got, w := statsOut.ReplaceAllString(r.out, ""), statsOut.ReplaceAllString(want, ""); !sameLines(got, w) {
			t.Errorf("antctl get ovsflows printed\n%s\novs-ofctl dump-flows prints\n%s", r.out, want)
		}
		for _, l := range strings.Split(strings.TrimRight(r.out, "\n"), "\n") {
			if !strings.HasPrefix(l, " cookie=") || !strings.Contains(l, ", duration=") || !strings.Contains(l, ", idle_age=") {
				t.Errorf("line %q is not in dump-flows' form ( cookie=…, duration=…, table=…, n_packets=…, n_bytes=…, idle_age=…, …)", l)
				break
			}
		}
	})
	t.Run("-T takes several tables, as upstream's", func(t *testing.T) {
		l2, _ := n.flows.Pipeline().Lookup("L2ForwardingCalc")
		want := withoutStats(ofctl(fmt.Sprintf("table=%d", classifier.ID)) + "\n" + ofctl(fmt.Sprintf("table=%d", l2.ID)))
		r := n.antctl(t, nil, "get", "ovsflows", "-T", "Classifier,"+fmt.Sprint(l2.ID))
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		if got := withoutStats(r.out); len(got) == 0 || !slices.Equal(got, want) {
			t.Errorf("-T Classifier,%d printed\n%s\nwant both tables' flows\n%s", l2.ID, r.out, strings.Join(want, "\n"))
		}
	})
	t.Run("-G prints the groups as ovs-ofctl dump-groups", func(t *testing.T) {
		// The Service installed above has a select group.
		out, err := n.br.Ofctl("dump-groups", "br-int")
		if err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`(?m)^OFPST_GROUP_DESC reply.*\n`).ReplaceAllString(out, "")
		if strings.TrimSpace(want) == "" {
			t.Fatal("the Service left no group to compare")
		}
		r := n.antctl(t, nil, "get", "ovsflows", "-G", "all")
		if r.runErr != nil || !sameLines(r.out, want) {
			t.Errorf("-G all printed (%v)\n%s\novs-ofctl dump-groups prints\n%s", r.runErr, r.out, want)
		}
		id := regexp.MustCompile(`group_id=(\d+)`).FindStringSubmatch(want)[1]
		r = n.antctl(t, nil, "get", "ovsflows", "-G", id)
		if lines := strings.Split(strings.TrimSpace(r.out), "\n"); r.runErr != nil || len(lines) != 1 || !strings.Contains(lines[0], "group_id="+id+",") {
			t.Errorf("-G %s printed (%v)\n%s\nwant that group alone", id, r.runErr, r.out)
		}
		r = n.antctl(t, nil, "get", "ovsflows", "-G", "ten")
		if r.runErr == nil || r.runErr.Error() != `-G "ten": want group IDs (comma-separated) or all` {
			t.Errorf("-G ten: %v", r.runErr)
		}
	})
}

func sameLines(a, b string) bool {
	split := func(s string) []string {
		l := strings.Split(strings.TrimRight(s, "\n"), "\n")
		sort.Strings(l)
		return l
	}
	return slices.Equal(split(a), split(b))
}

func TestPodInterfaceReadsOVSDB(t *testing.T) {
	n := newNode(t)
	w := n.addPod(t, web0)
	c := n.addPod(t, client)
	row := func(p *corev1.Pod, bp *bridgetest.Pod) []string {
		return []string{p.Namespace, p.Name, bp.HostIF, p.Status.PodIP, bp.MAC.String(), fmt.Sprint(bp.OFPort), "c0ffee-" + p.Name}
	}
	header := []string{"NAMESPACE", "NAME", "INTERFACE", "IP", "MAC", "OFPORT", "CONTAINER-ID"}
	for _, tc := range []struct {
		name string
		args []string
		want [][]string
	}{
		{"every pod of the node", []string{"get", "podinterface"}, [][]string{header, row(client, c), row(web0, w)}},
		{"one pod", []string{"get", "pi", "-p", web0.Name, "-n", web0.Namespace}, [][]string{header, row(web0, w)}},
		{"NAME -n NS, as upstream's", []string{"get", "podinterface", web0.Name, "-n", web0.Namespace}, [][]string{header, row(web0, w)}},
		{"NAME: that pod in any namespace, as upstream's", []string{"get", "podinterface", client.Name}, [][]string{header, row(client, c)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.antctl(t, nil, tc.args...)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			got := rows(r.out)
			sort.Slice(got[1:], func(i, j int) bool { return got[1+i][4] < got[1+j][4] })
			want := tc.want
			sort.Slice(want[1:], func(i, j int) bool { return want[1+i][4] < want[1+j][4] })
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("antctl %s printed\n%s\nwant %q", strings.Join(tc.args, " "), r.out, want)
			}
		})
	}
	r := n.antctl(t, nil, "get", "podinterface", "-n", "default")
	if r.runErr != nil || r.out != "" || r.err != "No pod interfaces of namespace default on this node.\n" {
		t.Errorf("no pod of the namespace: out %q err %q (%v)", r.out, r.err, r.runErr)
	}
	r = n.antctl(t, nil, "get", "podinterface", "web-9")
	if r.runErr == nil || r.runErr.Error() != `no pod named "web-9" has an interface on this node (did you mean "web-0"?)` {
		t.Errorf("an unknown NAME: %v", r.runErr)
	}
}

// TestOVSFlowsOfAPolicy installs two policies' rules on one pod, as the
// agent would with ids only it knows, and checks that --policy finds each
// policy's flows from the controller's view of it.
func TestOVSFlowsOfAPolicy(t *testing.T) {
	n := newNode(t)
	w := n.addPod(t, web0)
	n.addPod(t, client)
	ctx := context.Background()
	prefix := func(p *corev1.Pod) netip.Prefix { return netip.MustParsePrefix(p.Status.PodIP + "/32") }
	// allow-client: ingress to web-0 from client on TCP 80 (npWeb). deny-other
	// (defined below): ingress to web-0 from 10.10.2.0/24 on TCP 80.
	const idWeb, idOther = 7, 8
	for _, r := range []*agentof.PolicyRule{
		{ID: idWeb, Direction: agentof.DirectionIngress, Peers: []netip.Prefix{prefix(client)}, AppliedTo: []uint32{w.OFPort},
			Services: []agentof.PolicyPort{{Protocol: 6, Port: 80}}, Priority: agentof.PolicyRulePriority},
		{ID: idOther, Direction: agentof.DirectionIngress, Peers: []netip.Prefix{netip.MustParsePrefix("10.10.2.0/24")}, AppliedTo: []uint32{w.OFPort},
			Services: []agentof.PolicyPort{{Protocol: 6, Port: 80}}, Priority: agentof.PolicyRulePriority},
	} {
		if err := agentof.NewRuleWriter(n.flows).Install(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := agentof.NewRuleWriter(n.flows).SetIsolatedPorts(ctx, agentof.DirectionIngress, []uint32{w.OFPort}); err != nil {
		t.Fatal(err)
	}
	c := defaultCluster()
	atgWeb0 := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-web-0"}, GroupMembers: []cpv1beta2.GroupMember{querytest.Member(web0)}}
	npBlock := &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-from-block"},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "demo", Name: "from-block"},
		AppliedToGroups: []string{atgWeb0.Name},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn, Services: []cpv1beta2.Service{{Protocol: ptr.To(cpv1beta2.ProtocolTCP), Port: ptr.To(intstr.FromInt32(80))}},
			From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("10.10.2.0").To4()), PrefixLength: 24}}}}}},
	}
	c.Policies = append(c.Policies, npBlock)
	c.ATGs = append(c.ATGs, atgWeb0)

	// What the agent installed for a rule: the flows carrying its
	// conjunction, its conj_id flow, and the isolation of its pod.
	ruleTable, _ := n.flows.Pipeline().Lookup(agentof.IngressRuleTable.Name)
	dropTable, _ := n.flows.Pipeline().Lookup(agentof.IngressDefaultRuleTable.Name)
	flowsOf := func(id uint32) []string {
		var out []string
		for _, f := range n.flows.Flows() {
			mine := f.Table == dropTable.ID && f.Priority > 0 // not its miss flow
			for _, a := range f.Actions {
				if cj, ok := a.(*openflow.Conjunction); ok && cj.ID == id {
					mine = true
				}
			}
			if mf, ok := f.Match.Get(openflow.FieldConjID); ok && f.Table == ruleTable.ID && uint32(mf.Value.Lo) == id {
				mine = true
			}
			if mine {
				out = append(out, f.String())
			}
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		policy string
		id     uint32
	}{
		{"demo/allow-client", idWeb},
		{"demo/from-block", idOther},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r := n.antctl(t, c, "get", "ovsflows", "--policy", tc.policy)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			if got, want := withoutStats(r.out), flowsOf(tc.id); len(want) < 4 || !slices.Equal(got, want) {
				t.Errorf("--policy %s printed\n%s\nwant rule %d's flows\n%s", tc.policy, strings.Join(got, "\n"), tc.id, strings.Join(want, "\n"))
			}
		})
	}
	t.Run("a policy of no local pod says so", func(t *testing.T) {
		r := n.antctl(t, c, "get", "ovsflows", "--policy", "default/deny-other")
		if r.runErr != nil || r.out != "" || !strings.Contains(r.err, "networkpolicy default/deny-other applies to no pod on this node") {
			t.Errorf("out %q err %q (%v)", r.out, r.err, r.runErr)
		}
	})
	t.Run("an unknown policy names the closest", func(t *testing.T) {
		r := n.antctl(t, c, "get", "ovsflows", "--policy", "demo/allow-clinet")
		if want := `networkpolicy "demo/allow-clinet" not found (did you mean "demo/allow-client"?)`; r.runErr == nil || r.runErr.Error() != want {
			t.Errorf("error %v, want %q", r.runErr, want)
		}
	})
}
