package networkpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/agent/dpcache"
	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// policyNode is one real node (OVS userspace) with pods web (serving TCP
// 8080), a and b, the pipeline, and this package's controller watching a
// fake controlplane API whose policies the test sets.
type policyNode struct {
	br        *bridgetest.Bridge
	web, a, b *bridgetest.Pod
	client    *fake.Clientset
	auditDir  string
	gen       int64
	// narrowed, if set, is called after a narrowing write's datapath purge,
	// before the policy is reported realized.
	narrowed func()
	// flows and ctl are the node's OpenFlow client and policy controller,
	// store its interface store.
	flows *agentof.Client
	ctl   *Controller
	store interfacestore.InterfaceStore
}

// newPolicyNode starts a node; each with may change the OpenFlow client
// and the controller's options before they start.
func newPolicyNode(t *testing.T, with ...func(*agentof.Client, *Options)) *policyNode {
	return newPolicyNodeOf(t, false, with...)
}

// newDualStackPolicyNode is newPolicyNode on a dual-stack node: the pods
// also have IPv6 addresses (fd00:10:244:1::3, ::4, ::5), members of their
// groups with both, and web answers on both families.
func newDualStackPolicyNode(t *testing.T, with ...func(*agentof.Client, *Options)) *policyNode {
	return newPolicyNodeOf(t, true, with...)
}

func newPolicyNodeOf(t *testing.T, dual bool, with ...func(*agentof.Client, *Options)) *policyNode {
	t.Helper()
	br := bridgetest.New(t)
	if dual {
		br.AddGatewayIPv6(t, "fd00:10:244:1::1/64")
	}
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *binding.Conn) error { return flows.Replay(ctx, conn) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	n := &policyNode{br: br, client: newClient(), auditDir: t.TempDir()}
	store := interfacestore.NewInterfaceStore()
	for i, p := range []**bridgetest.Pod{&n.web, &n.a, &n.b} {
		name := []string{"web", "a", "b"}[i]
		*p = br.AddPod(t, name, fmt.Sprintf("10.10.1.%d/24", 3+i))
		pod := *p
		ips := []net.IP{pod.IP}
		if dual {
			pod.AddIPv6(t, br, fmt.Sprintf("fd00:10:244:1::%d/64", 3+i))
			ips = append(ips, pod.IPv6)
		}
		if err := flows.InstallPodFlows(pod.HostIF, ips, pod.MAC, pod.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(pod.HostIF, "c-"+name, name, "default", "eth0", pod.MAC, ips, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(pod.OFPort)}
		store.AddInterface(iface)
		m := member("default", name, pod.IP.String())
		if dual {
			m.IPs = append(m.IPs, cpv1beta2.IPAddress(pod.IPv6))
		}
		if err := n.client.Tracker().Add(&cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-" + name},
			GroupMembers: []cpv1beta2.GroupMember{m}}); err != nil {
			t.Fatal(err)
		}
		if err := n.client.Tracker().Add(&cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-" + name},
			GroupMembers: []cpv1beta2.GroupMember{m}}); err != nil {
			t.Fatal(err)
		}
	}
	n.web.ServeWho(t, 8080)
	if dual {
		n.web.ServeWho6(t, 8080)
	}
	packets := agentof.NewPacketInDispatcher(br.OF)
	go packets.Run(ctx)
	// As the agent does: a narrowing write purges the datapath cache
	// before the policy is reported realized.
	purger := dpcache.New(dpcache.AppctlPurge(br.Dir())) // the agent's purge, on this instance
	opts := Options{
		OnNarrowed: func() {
			if err := purger.Sync(ctx); err != nil && ctx.Err() == nil { // not the test's end
				t.Errorf("purge the datapath cache: %v", err)
			}
			if n.narrowed != nil {
				n.narrowed()
			}
		},
		PacketIns: &PacketIns{IO: packets, Parser: flows, AuditLogDir: n.auditDir},
	}
	for _, w := range with {
		w(flows, &opts)
	}
	if opts.FQDN != nil && opts.FQDN.Flows == nil {
		opts.FQDN.Flows = flows
		opts.FQDN.Live = ConntrackLive(&flowexporter.DpctlSource{RunDir: br.Dir(), Datapath: "netdev@ovs-netdev",
			Zones: agentof.CtZones()}) // the agent's: both families'
	}
	c := NewController("node-1", n.client, flows, store, opts)
	done := make(chan struct{})
	n.flows, n.ctl, n.store = flows, c, store
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-c.InitialRealized():
	case <-time.After(15 * time.Second):
		t.Fatal("the controller did not start")
	}
	return n
}

var npGVR = cpv1beta2.SchemeGroupVersion.WithResource("networkpolicies")

// set makes the given policies the only ones.
func (n *policyNode) set(t *testing.T, nps ...*cpv1beta2.NetworkPolicy) {
	t.Helper()
	want := map[string]bool{}
	for _, np := range nps {
		n.gen++
		np.Generation = n.gen
		want[np.Name] = true
		if _, err := n.client.Tracker().Get(npGVR, "", np.Name); err == nil {
			if err := n.client.Tracker().Update(npGVR, np, ""); err != nil {
				t.Fatal(err)
			}
		} else if err := n.client.Tracker().Add(np); err != nil {
			t.Fatal(err)
		}
	}
	list, err := n.client.Tracker().List(npGVR, cpv1beta2.SchemeGroupVersion.WithKind("NetworkPolicy"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.(*cpv1beta2.NetworkPolicyList).Items {
		if !want[o.Name] {
			if err := n.client.Tracker().Delete(npGVR, "", o.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// tcpOutcome is what a client sees connecting to web:8080: "web",
// "refused" or "timeout".
func (n *policyNode) tcpOutcome(t *testing.T, c *bridgetest.Pod) string {
	t.Helper()
	return dialOutcome(t, c, net.JoinHostPort(n.web.IP.String(), "8080"), 400*time.Millisecond)
}

// dialOutcome connects from c to addr over TCP: who answered, "refused" or
// "timeout" (after timeout).
func dialOutcome(t *testing.T, c *bridgetest.Pod, addr string, timeout time.Duration) string {
	t.Helper()
	answer, err := c.AskWho(t, "tcp", addr, timeout) // the family of addr
	switch {
	case err == nil:
		who, _ := bridgetest.Answerer(answer)
		return who
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	}
	return "timeout"
}

// expect waits (bounded) until every client sees its outcome, as the
// policies are realized asynchronously.
func (n *policyNode) expect(t *testing.T, why string, want map[*bridgetest.Pod]string) {
	t.Helper()
	n.expectAt(t, why, net.JoinHostPort(n.web.IP.String(), "8080"), want)
}

// expectAt is expect with the clients connecting to addr (web's IPv6
// address and port, on a dual-stack node).
func (n *policyNode) expectAt(t *testing.T, why, addr string, want map[*bridgetest.Pod]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]string{}
		ok := true
		for c, w := range want {
			got[c.Name] = dialOutcome(t, c, addr, 400*time.Millisecond)
			ok = ok && got[c.Name] == w
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			wantByName := map[string]string{}
			for c, w := range want {
				wantByName[c.Name] = w
			}
			t.Fatalf("%s: want %v, got %v\nflows:\n%s", why, wantByName, got, strings.Join(n.br.DumpFlows(t), "\n"))
		}
	}
}

// antreaPolicy is a ClusterNetworkPolicy applied to appliedTo (an
// AppliedToGroup name) in a tier (its priority) with a priority.
func antreaPolicy(name string, tier int32, priority float64, appliedTo string, rules ...cpv1beta2.NetworkPolicyRule) *cpv1beta2.NetworkPolicy {
	for i := range rules {
		rules[i].Priority = int32(i) // rule order per direction: these tests use one direction per policy
		if rules[i].Name == "" {
			rules[i].Name = fmt.Sprintf("rule-%d", i)
		}
	}
	return &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, AppliedToGroups: []string{appliedTo},
		TierPriority: &tier, Priority: &priority, Rules: rules,
		SourceRef: &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: name}}
}

func k8sPolicy(name string, from ...string) *cpv1beta2.NetworkPolicy {
	return &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, AppliedToGroups: []string{"atg-web"},
		SourceRef: &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "default", Name: name},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn, Priority: -1,
			From: cpv1beta2.NetworkPolicyPeer{AddressGroups: from}}}}
}

func ingressFrom(action cpv1beta2.RuleAction, from string) cpv1beta2.NetworkPolicyRule {
	return cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionIn, Action: &action,
		From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{from}}}
}

// Static tiers (docs/antrea-network-policy.md upstream).
const (
	tierSecurityOps int32 = 100
	tierApplication int32 = 250
	tierBaseline    int32 = 253
)

const (
	allow  = cpv1beta2.RuleActionAllow
	drop   = cpv1beta2.RuleActionDrop
	reject = cpv1beta2.RuleActionReject
	pass   = cpv1beta2.RuleActionPass
)

// The semantics of Antrea-native policies as upstream documents them
// (docs/antrea-network-policy.md: "Tier", "Priority", "Rule actions",
// "Baseline tier"), on a real node: each step sets the policies, then
// checks what clients a and b see connecting to web.
func TestAntreaNativePoliciesAreEvaluatedByTierPriorityAndRuleOrder(t *testing.T) {
	n := newPolicyNode(t)
	a, b := n.a, n.b
	n.expect(t, "without policy everyone reaches web", map[*bridgetest.Pod]string{a: "web", b: "web"})

	n.set(t, antreaPolicy("app-allow-a", tierApplication, 1, "atg-web", ingressFrom(allow, "ag-a")))
	n.expect(t, "an Antrea-native policy does not isolate web: b, which no rule matches, still connects",
		map[*bridgetest.Pod]string{a: "web", b: "web"})

	n.set(t, antreaPolicy("app-allow-a", tierApplication, 1, "atg-web", ingressFrom(allow, "ag-a")),
		antreaPolicy("sec-drop-a", tierSecurityOps, 5, "atg-web", ingressFrom(drop, "ag-a")))
	n.expect(t, "a Drop in securityops beats an Allow in application, whatever their priorities",
		map[*bridgetest.Pod]string{a: "timeout", b: "web"})

	n.set(t, antreaPolicy("app-allow-a", tierApplication, 2, "atg-web", ingressFrom(allow, "ag-a")),
		antreaPolicy("app-drop-a", tierApplication, 1, "atg-web", ingressFrom(drop, "ag-a")))
	n.expect(t, "in one tier the policy with the lower priority number wins (Drop at 1 over Allow at 2)",
		map[*bridgetest.Pod]string{a: "timeout", b: "web"})
	n.set(t, antreaPolicy("app-allow-a", tierApplication, 2, "atg-web", ingressFrom(allow, "ag-a")),
		antreaPolicy("app-drop-a", tierApplication, 3, "atg-web", ingressFrom(drop, "ag-a")))
	n.expect(t, "...and the other way round (Allow at 2 over Drop at 3)", map[*bridgetest.Pod]string{a: "web", b: "web"})

	n.set(t, antreaPolicy("app-rules", tierApplication, 1, "atg-web", ingressFrom(drop, "ag-a"), ingressFrom(allow, "ag-a")))
	n.expect(t, "in one policy the first rule wins (Drop before Allow)", map[*bridgetest.Pod]string{a: "timeout", b: "web"})
	n.set(t, antreaPolicy("app-rules", tierApplication, 1, "atg-web", ingressFrom(allow, "ag-a"), ingressFrom(drop, "ag-a")))
	n.expect(t, "in one policy the first rule wins (Allow before Drop)", map[*bridgetest.Pod]string{a: "web", b: "web"})

	n.set(t, antreaPolicy("base-drop-a", tierBaseline, 1, "atg-web", ingressFrom(drop, "ag-a")))
	n.expect(t, "a baseline Drop applies when no K8s NetworkPolicy selects web", map[*bridgetest.Pod]string{a: "timeout", b: "web"})

	n.set(t, antreaPolicy("base", tierBaseline, 1, "atg-web", ingressFrom(drop, "ag-a"), ingressFrom(allow, "ag-b")),
		k8sPolicy("web-from-a", "ag-a"))
	n.expect(t, "a K8s NetworkPolicy selecting web decides before baseline: its Allow of a is final, its isolation wins over baseline's Allow of b",
		map[*bridgetest.Pod]string{a: "web", b: "timeout"})

	n.set(t, antreaPolicy("sec-pass-a", tierSecurityOps, 1, "atg-web", ingressFrom(pass, "ag-a")),
		antreaPolicy("app-drop-a", tierApplication, 1, "atg-web", ingressFrom(drop, "ag-a")),
		k8sPolicy("web-from-a", "ag-a"))
	n.expect(t, "Pass skips the later tiers' rules and hands a to the K8s NetworkPolicy, which allows it (b is isolated)",
		map[*bridgetest.Pod]string{a: "web", b: "timeout"})
	n.set(t, antreaPolicy("app-drop-a", tierApplication, 1, "atg-web", ingressFrom(drop, "ag-a")),
		k8sPolicy("web-from-a", "ag-a"))
	n.expect(t, "without the Pass the application Drop decides", map[*bridgetest.Pod]string{a: "timeout", b: "timeout"})

	n.set(t, antreaPolicy("sec-pass-a", tierSecurityOps, 1, "atg-web", ingressFrom(pass, "ag-a")),
		antreaPolicy("app-allow-a", tierApplication, 1, "atg-web", ingressFrom(allow, "ag-a")),
		antreaPolicy("base-drop-a", tierBaseline, 1, "atg-web", ingressFrom(drop, "ag-a")))
	n.expect(t, "Pass with no K8s NetworkPolicy selecting web goes on to baseline, whose Drop applies (the application Allow is skipped)",
		map[*bridgetest.Pod]string{a: "timeout", b: "web"})
	for _, tb := range []*agentof.TableSpec{agentof.AntreaPolicyIngressRuleTable, agentof.IngressBaselineRuleTable} {
		for _, f := range n.br.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(tb).ID)) {
			t.Logf("ingress policy: %s", f)
		}
	}

	n.set(t)
	n.expect(t, "with the policies gone everyone reaches web again", map[*bridgetest.Pod]string{a: "web", b: "web"})
}

// udpOutcome sends a datagram from c to web:9999 on a connected socket
// and returns the error the next read gets (the ICMP error of a reject,
// or a timeout).
func udpOutcome(t *testing.T, c, to *bridgetest.Pod) error {
	t.Helper()
	return udpOutcomeTo(t, c, to.IP)
}

// udpOutcomeTo is udpOutcome to an address of either family.
func udpOutcomeTo(t *testing.T, c *bridgetest.Pod, to net.IP) error {
	t.Helper()
	conn, err := c.Dial(t, "udp", net.JoinHostPort(to.String(), "9999"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = conn.Read(make([]byte, 16))
	return err
}

// Reject (upstream: "Reject ... TCP RST for TCP, ICMP
// host-administratively-prohibited otherwise"): the client's connect is
// refused at once and its UDP socket gets the ICMP error, on ingress and
// on egress; the answer never meets policy (the rejecting rules would
// reject it again) and a flood is metered.
func TestRejectRefusesTCPAndAnswersUDPWithICMP(t *testing.T) {
	n := newPolicyNode(t)
	n.expect(t, "without policy a reaches web", map[*bridgetest.Pod]string{n.a: "web"})
	n.set(t, antreaPolicy("reject-a", tierApplication, 1, "atg-web", ingressFrom(reject, "ag-a")))
	n.expect(t, "an ingress Reject refuses a's connection (TCP RST), b still connects",
		map[*bridgetest.Pod]string{n.a: "refused", n.b: "web"})
	if err := udpOutcome(t, n.a, n.web); !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("a UDP datagram to a rejecting pod gets ICMP host administratively prohibited, which the client's read reports as EHOSTUNREACH; got %v", err)
	}

	egress := antreaPolicy("reject-b-out", tierApplication, 1, "atg-b", cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionOut,
		Action: ptr(reject), To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-web"}}})
	n.set(t, egress)
	n.expect(t, "an egress Reject on b refuses b's connection to web, a connects", map[*bridgetest.Pod]string{n.a: "web", n.b: "refused"})
	if err := udpOutcome(t, n.b, n.web); !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("b's UDP datagram to web is rejected on egress: want EHOSTUNREACH, got %v", err)
	}
}

// Audit logging (upstream docs/antrea-network-policy.md "Audit logging"):
// a rule with enableLogging writes one line per new connection to np.log
// in upstream's format; the same Drop line within a second is written
// once with its count.
func TestAuditLogLinesOfLoggingRules(t *testing.T) {
	n := newPolicyNode(t)
	dropA := ingressFrom(drop, "ag-a")
	dropA.EnableLogging, dropA.LogLabel, dropA.Name = true, "audit-a", "drop-a"
	allowB := ingressFrom(allow, "ag-b")
	allowB.EnableLogging, allowB.Name = true, "allow-b"
	n.set(t, antreaPolicy("logged", tierApplication, 5, "atg-web", dropA, allowB))
	n.expect(t, "a is dropped, b allowed", map[*bridgetest.Pod]string{n.a: "timeout", n.b: "web"})
	// The round that met the expectation may have probed b (or a) before the
	// policy was in place (map order): one connection each now that it is.
	if got := n.tcpOutcome(t, n.a); got != "timeout" {
		t.Fatalf("a with the policy in place: %s, want timeout", got)
	}
	if got := n.tcpOutcome(t, n.b); got != "web" {
		t.Fatalf("b with the policy in place: %s, want web", got)
	}
	// Three datagrams from one socket within a second: one deduplicated line.
	conn, err := n.a.Dial(t, "udp4", net.JoinHostPort(n.web.IP.String(), "8080"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	udpPort := conn.LocalAddr().(*net.UDPAddr).Port
	for range 3 {
		if _, err := conn.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()

	lines := n.auditLines(t, func(log string) bool {
		return strings.Contains(log, fmt.Sprintf(" %d 10.10.1.3 8080 UDP ", udpPort))
	})
	udpLine, dropLine, allowLine := lastLine(lines, " UDP "), lastLine(lines, " TCP ", " Drop "), lastLine(lines, " Allow ")
	check := func(what, line string, want []string) { t.Helper(); checkAuditLine(t, what, line, lines, want) }
	check("a's TCP connection dropped", dropLine, []string{"AntreaPolicyIngressRule", "AntreaClusterNetworkPolicy:logged", "drop-a",
		"Ingress", "Drop", "*", "default/web", "10.10.1.4", "*", "10.10.1.3", "8080", "TCP", "60", "audit-a"})
	check("b's TCP connection allowed", allowLine, []string{"AntreaPolicyIngressRule", "AntreaClusterNetworkPolicy:logged", "allow-b",
		"Ingress", "Allow", "*", "default/web", "10.10.1.5", "*", "10.10.1.3", "8080", "TCP", "60", "<nil>"})
	check("a's UDP datagrams dropped", udpLine, []string{"AntreaPolicyIngressRule", "AntreaClusterNetworkPolicy:logged", "drop-a",
		"Ingress", "Drop", "*", "default/web", "10.10.1.4", fmt.Sprint(udpPort), "10.10.1.3", "8080", "UDP", "29", "audit-a"})
	if !strings.Contains(udpLine, "[3 packets in ") {
		t.Errorf("three identical Drop lines within a second are written once with their count, got %q", udpLine)
	}
}

// auditLines waits (bounded) until np.log says what done looks for, and
// returns its lines.
func (n *policyNode) auditLines(t *testing.T, done func(log string) bool) []string {
	t.Helper()
	var lines []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(n.auditDir, "np.log"))
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		if done(string(data)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("np.log:\n%s", strings.Join(lines, "\n"))
	return lines
}

// lastLine is the last of lines holding every part ("" if none).
func lastLine(lines []string, parts ...string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(lines[i], p)
		}
		if all {
			return lines[i]
		}
	}
	return ""
}

// checkAuditLine checks a line of np.log against upstream's format, field
// by field from the table on ("*": any value):
//
//	<date> <time> <table> <policy> <rule> <direction> <action> <priority> <pod> <src> <sport> <dst> <dport> <proto> <len> <label>
func checkAuditLine(t *testing.T, what, line string, lines, want []string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 16 {
		t.Fatalf("%s: no line in upstream's format in np.log:\n%s", what, strings.Join(lines, "\n"))
	}
	if _, err := time.Parse("2006/01/02 15:04:05.000000", f[0]+" "+f[1]); err != nil {
		t.Errorf("%s: the line starts with date and time in microseconds: %v", what, err)
	}
	for i, w := range want {
		if w != "*" && f[2+i] != w {
			t.Errorf("%s: field %d is %q, want %q (line %q)", what, 2+i, f[2+i], w, line)
		}
	}
}

// K8s NetworkPolicy audit logging (upstream docs/antrea-network-policy.md,
// "Audit logging" for K8s NetworkPolicies: the Namespace annotation
// networkpolicy.antrea.io/enable-logging, which the controller turns into
// enableLogging on the policy's rules): an allowed connection is logged
// under the policy's name, the isolation drop of a pod the policy isolates
// under K8sNetworkPolicy alone; once logging is off, nothing more is logged.
func TestK8sNetworkPolicyAuditLogOfAllowsAndIsolationDrops(t *testing.T) {
	n := newPolicyNode(t)
	logged := k8sPolicy("allow-b", "ag-b")
	logged.Rules[0].EnableLogging = true
	n.set(t, logged)
	n.expect(t, "web is isolated: a is dropped, b allowed", map[*bridgetest.Pod]string{n.a: "timeout", n.b: "web"})
	// The round that met the expectation may have probed b before the
	// policy was in OVS (the pods are probed in map order): probe again now
	// that a's timeout shows it is, so that b's connection meets the rule.
	n.expect(t, "again, with the policy in place", map[*bridgetest.Pod]string{n.a: "timeout", n.b: "web"})
	lines := n.auditLines(t, func(log string) bool {
		return strings.Contains(log, " Drop ") && strings.Contains(log, " Allow ")
	})
	dropLine, allowLine := lastLine(lines, " Drop "), lastLine(lines, " Allow ")
	checkAuditLine(t, "b's connection allowed", allowLine, lines, []string{"IngressRule", "K8sNetworkPolicy:default/allow-b", "<nil>",
		"Ingress", "Allow", fmt.Sprint(agentof.PolicyRulePriority), "default/web", "10.10.1.5", "*", "10.10.1.3", "8080", "TCP", "60", "<nil>"})
	checkAuditLine(t, "a's connection dropped by the isolation", dropLine, lines, []string{"IngressDefaultRule", "K8sNetworkPolicy", "<nil>",
		"Ingress", "Drop", "<nil>", "default/web", "10.10.1.4", "*", "10.10.1.3", "8080", "TCP", "60", "<nil>"})

	notLogged := k8sPolicy("allow-b", "ag-b")
	n.set(t, notLogged)
	// The change reaches OVS asynchronously: wait until the drop flow no
	// longer sends packets to the agent, then count the lines.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(strings.Join(n.br.DumpFlows(t), "\n"), "userdata=02") { // a policy packet-in
		if time.Now().After(deadline) {
			t.Fatalf("the policy without logging still sends packets to the agent:\n%s", strings.Join(n.br.DumpFlows(t), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // past the dedup window of lines already sent
	before := len(n.auditLines(t, func(string) bool { return true }))
	n.expect(t, "logging off, web stays isolated", map[*bridgetest.Pod]string{n.a: "timeout", n.b: "web"})
	time.Sleep(1500 * time.Millisecond)
	if after := n.auditLines(t, func(string) bool { return true }); len(after) != before {
		t.Errorf("with logging off no line is written, got %d new: %q", len(after)-before, after[before:])
	}
}
