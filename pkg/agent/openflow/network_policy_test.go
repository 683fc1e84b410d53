package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// recordingBridge keeps what OVS would hold, applying flow mods in order; it
// stands in for the switch in unit tests (the same client is tested against
// real OVS below).
type recordingBridge struct {
	mu      sync.Mutex
	flows   map[string]*binding.Flow
	bundles int
	// refuse, when set, is what the next bundles fail with (nothing applied).
	refuse error
}

func newRecordingBridge() *recordingBridge {
	return &recordingBridge{flows: map[string]*binding.Flow{}}
}

func (r *recordingBridge) Bundle(_ context.Context, msgs ...binding.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		return r.refuse
	}
	r.bundles++
	for _, m := range msgs {
		fm, ok := m.(*binding.FlowMod)
		if !ok {
			return fmt.Errorf("unexpected message %T", m)
		}
		f := fm.Flow
		switch fm.Command {
		case binding.FlowAdd:
			r.flows[f.MatchKey()] = &f
		case binding.FlowDeleteStrict:
			delete(r.flows, f.MatchKey())
		case binding.FlowDelete:
			for k, g := range r.flows {
				if g.Cookie&fm.CookieMask == fm.Flow.Cookie&fm.CookieMask {
					delete(r.flows, k)
				}
			}
		default:
			return fmt.Errorf("unexpected flow mod %v", fm.Command)
		}
	}
	return nil
}

func (r *recordingBridge) inTable(t *Table) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.flows {
		if f.Table == t.ID {
			out = append(out, f.String())
		}
	}
	return out
}

func newUnitClient(t *testing.T) (*Client, *recordingBridge) {
	t.Helper()
	br := newRecordingBridge()
	c, err := NewClient(br, 1)
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac}); err != nil {
		t.Fatal(err)
	}
	return c, br
}

func hostPrefixes(n int, base string) []netip.Prefix {
	a := netip.MustParseAddr(base)
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.PrefixFrom(a, 32)
		a = a.Next()
	}
	return out
}

func TestRuleFlowsGrowAsSourcesPlusDestinations(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		t.Run(fmt.Sprintf("%dx%d", n, n), func(t *testing.T) {
			c, br := newUnitClient(t)
			rw := NewRuleWriter(c)
			before := len(br.inTable(c.p.Table(IngressRuleTable)))
			ports := make([]uint32, n)
			for i := range ports {
				ports[i] = uint32(10 + i)
			}
			r := &PolicyRule{ID: 1, Direction: DirectionIngress, Peers: hostPrefixes(n, "10.20.0.1"), AppliedTo: ports,
				Services: []PolicyPort{{Protocol: 6, Port: 80}}, Priority: PolicyRulePriority}
			if err := rw.Install(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			got := len(br.inTable(c.p.Table(IngressRuleTable))) - before
			if want := n + n + 1 + 1; got != want {
				t.Fatalf("a rule with %d sources, %d destinations and 1 service should add %d flows (sources + destinations + service + conj_id), added %d", n, n, want, got)
			}
		})
	}
}

func TestRulesSharingAMatchShareOneFlow(t *testing.T) {
	c, br := newUnitClient(t)
	rw := NewRuleWriter(c)
	ctx := context.Background()
	peer := []netip.Prefix{netip.MustParsePrefix("10.20.0.5/32")}
	r1 := &PolicyRule{ID: 1, Direction: DirectionIngress, Peers: peer, AppliedTo: []uint32{10}, Priority: PolicyRulePriority}
	r2 := &PolicyRule{ID: 2, Direction: DirectionIngress, Peers: peer, AppliedTo: []uint32{11}, Priority: PolicyRulePriority}
	for _, r := range []*PolicyRule{r1, r2} {
		if err := rw.Install(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	shared := ""
	for _, f := range br.inTable(c.p.Table(IngressRuleTable)) {
		if strings.Contains(f, "nw_src=10.20.0.5") {
			if shared != "" {
				t.Fatalf("one flow should carry both rules' conjunctions, found two:\n%s\n%s", shared, f)
			}
			shared = f
		}
	}
	if !strings.Contains(shared, "conjunction(1,1/2),conjunction(2,1/2)") {
		t.Fatalf("shared peer flow should carry both conjunctions, got %q", shared)
	}
	// Removing one rule keeps the flow for the other; removing both removes it.
	if err := rw.Uninstall(ctx, 1); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range br.inTable(c.p.Table(IngressRuleTable)) {
		if strings.Contains(f, "nw_src=10.20.0.5") {
			found = true
			if strings.Contains(f, "conjunction(1,") {
				t.Errorf("rule 1's conjunction should be gone: %s", f)
			}
		}
		if strings.Contains(f, "conj_id=1") {
			t.Errorf("rule 1's conj_id flow should be gone: %s", f)
		}
	}
	if !found {
		t.Fatal("the peer flow should stay while rule 2 uses it")
	}
	if err := rw.Uninstall(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, f := range br.inTable(c.p.Table(IngressRuleTable)) {
		if strings.Contains(f, "conjunction") || strings.Contains(f, "conj_id") {
			t.Errorf("no rule flow should remain: %s", f)
		}
	}
}

func TestPortRangesBecomeMaskedMatches(t *testing.T) {
	tests := []struct {
		port, end uint16
		want      string
	}{
		{80, 0, "[[80 65535]]"},
		{80, 80, "[[80 65535]]"},
		{1000, 1003, "[[1000 65532]]"},
		{1, 6, "[[1 65535] [2 65534] [4 65534] [6 65535]]"},
		{0x8000, 0xffff, "[[32768 32768]]"},
		{0, 0, "[[0 0]]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(portMasks(tt.port, tt.end)); got != tt.want {
			t.Errorf("portMasks(%d, %d) = %s, want %s", tt.port, tt.end, got, tt.want)
		}
	}
}

func TestIngressPolicyOnRealOVS(t *testing.T) {
	in, c := newRealBridge(t)
	rw := NewRuleWriter(c)
	pod1 := addPod(t, in, "p1", "10.10.1.2/24")
	pod2 := addPod(t, in, "p2", "10.10.1.3/24")
	pod3 := addPod(t, in, "p3", "10.10.1.4/24")
	for _, p := range []*testPod{pod1, pod2, pod3} {
		if err := c.InstallPodFlows(p.hostIF, []net.IP{p.ip}, p.mac, p.ofPort); err != nil {
			t.Fatal(err)
		}
	}
	pingEventually(t, pod3.ns, pod2.ip)
	ctx := context.Background()
	// pod2 is isolated for ingress; only pod1 may reach it.
	if err := rw.Install(ctx, &PolicyRule{ID: 7, Direction: DirectionIngress,
		Peers: []netip.Prefix{netip.PrefixFrom(addr(pod1.ip), 32)}, AppliedTo: []uint32{pod2.ofPort}, Priority: PolicyRulePriority}); err != nil {
		t.Fatal(err)
	}
	if err := rw.SetIsolatedPorts(ctx, DirectionIngress, []uint32{pod2.ofPort}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dumpFlows(t, in), "\n"), strings.Join(clientFlows(c), "\n"); got != want {
		t.Fatalf("the bridge should hold exactly the client's flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
	pingEventually(t, pod1.ns, pod2.ip)
	if err := ping(pod3.ns, pod2.ip); err == nil {
		t.Fatal("pod3 should not reach pod2: pod2 is isolated and no rule allows pod3")
	}
	pingEventually(t, pod2.ns, pod3.ip) // pod2's egress is not isolated; the reply is established traffic
	// pod3 joins the rule's peers: one more flow, and pod3 gets through.
	if err := rw.Install(ctx, &PolicyRule{ID: 7, Direction: DirectionIngress,
		Peers: []netip.Prefix{netip.PrefixFrom(addr(pod1.ip), 32), netip.PrefixFrom(addr(pod3.ip), 32)}, AppliedTo: []uint32{pod2.ofPort}, Priority: PolicyRulePriority}); err != nil {
		t.Fatal(err)
	}
	pingEventually(t, pod3.ns, pod2.ip)
	// Isolation lifted and rule removed: back to allow-all.
	if err := rw.Uninstall(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := rw.SetIsolatedPorts(ctx, DirectionIngress, nil); err != nil {
		t.Fatal(err)
	}
	pingEventually(t, pod3.ns, pod2.ip)
	if got, want := strings.Join(dumpFlows(t, in), "\n"), strings.Join(clientFlows(c), "\n"); got != want {
		t.Fatalf("after removal the bridge should hold exactly the client's flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
}

func TestThousandsOfRulesOnOnePodFitInOpenFlowMessages(t *testing.T) {
	c, br := newUnitClient(t)
	rw := NewRuleWriter(c)
	ctx := context.Background()
	for id := uint32(1); id <= 5000; id++ {
		r := &PolicyRule{ID: id, Direction: DirectionIngress, AppliedTo: []uint32{10},
			Peers:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 20, byte(id >> 8), byte(id)}), 32)},
			Priority: PolicyRulePriority}
		if err := rw.Install(ctx, r); err != nil {
			t.Fatalf("rule %d: %v", id, err)
		}
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	shared := 0
	for _, f := range br.flows {
		if _, err := binding.Marshal(binding.AddFlow(f), binding.Version15, 1); err != nil {
			t.Fatalf("flow %.80s... does not fit an OpenFlow message: %v", f.String(), err)
		}
		if strings.Contains(f.String(), "reg1=0xa ") {
			shared++
		}
	}
	if shared < 3 {
		t.Fatalf("5000 rules on one pod should spread its destination flow over at least 3 priorities, found %d flows", shared)
	}
}

// failingBridge rejects every bundle.
type failingBridge struct{ *recordingBridge }

func (f failingBridge) Bundle(context.Context, ...binding.Message) error {
	return fmt.Errorf("switch rejected the bundle")
}

func TestAFailedWriteLeavesTheRecordUnchanged(t *testing.T) {
	c, br := newUnitClient(t)
	rw := NewRuleWriter(c)
	ctx := context.Background()
	r := &PolicyRule{ID: 1, Direction: DirectionIngress, AppliedTo: []uint32{10},
		Peers: []netip.Prefix{netip.MustParsePrefix("10.20.0.5/32")}, Priority: PolicyRulePriority}
	if err := rw.Install(ctx, r); err != nil {
		t.Fatal(err)
	}
	before := clientFlows(c)
	c.bridge = failingBridge{br}
	if err := rw.Uninstall(ctx, 1); err == nil {
		t.Fatal("the uninstall should report the rejected bundle")
	}
	r2 := &PolicyRule{ID: 2, Direction: DirectionIngress, AppliedTo: []uint32{10},
		Peers: []netip.Prefix{netip.MustParsePrefix("10.20.0.6/32")}, Priority: PolicyRulePriority}
	if err := rw.Install(ctx, r2); err == nil {
		t.Fatal("the install should report the rejected bundle")
	}
	if got := clientFlows(c); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Fatalf("failed writes changed the client's record\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(got, "\n"))
	}
	// Once the switch accepts again, the retry removes the rule completely.
	c.bridge = br
	if err := rw.Uninstall(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, f := range br.inTable(c.p.Table(IngressRuleTable)) {
		if strings.Contains(f, "conjunction") || strings.Contains(f, "conj_id") {
			t.Errorf("flow of the removed rule left behind: %s", f)
		}
	}
}

func TestSourcePortRangesAndICMPTypesAreMatched(t *testing.T) {
	c, br := newUnitClient(t)
	rw := NewRuleWriter(c)
	// Upstream: sourcePort/sourceEndPort restrict the source port (any
	// destination port when port is unset); icmpType/icmpCode restrict ICMP.
	r := &PolicyRule{ID: 7, Direction: DirectionIngress, AnyPeer: true, AppliedTo: []uint32{10}, Priority: PolicyRulePriority,
		Services: []PolicyPort{
			{Protocol: binding.IPProtoTCP, SrcPort: 32768, SrcEndPort: 60999},
			{Protocol: binding.IPProtoUDP, Port: 53, SrcPort: 1000},
			{Protocol: binding.IPProtoICMP, HasICMPType: true, ICMPType: 8, HasICMPCode: true, ICMPCode: 0},
		}}
	if err := rw.Install(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	var clause []string
	for _, f := range br.inTable(c.p.Table(IngressRuleTable)) {
		if strings.Contains(f, "conjunction(7,2/2)") {
			clause = append(clause, f)
		}
	}
	// 32768-60999 is 32768/0xc000 49152/0xe000 57344/0xf800 59392/0xfc00
	// 60416/0xfe00 60928/0xffc0 60992/0xfff8: 7 TCP flows, then UDP, ICMP.
	if len(clause) != 9 {
		t.Fatalf("the service clause should have 9 flows (7 for the source range, UDP, ICMP), got %d:\n%s", len(clause), strings.Join(clause, "\n"))
	}
	for _, want := range []string{"tp_src=0x8000/0xc000", "tp_src=0xee40/0xfff8", "udp,tp_src=1000,tp_dst=53", "icmp_type=8,icmp_code=0"} {
		found := false
		for _, f := range clause {
			if strings.Contains(f, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no service flow matches %s:\n%s", want, strings.Join(clause, "\n"))
		}
	}
	for _, f := range clause {
		if strings.Contains(f, ",tcp,") && !strings.Contains(f, "tp_src=") {
			t.Errorf("a TCP flow of a source port range matches every source port: %s", f)
		}
	}
}

// With deny tracking, the flows that drop (Drop and Reject rules, the
// isolation drop) send one metered packet-in flagged PolicyPacketInDeny, and
// an Allow rule's flow sends none; without it, a Drop sends none.
func TestDenyTrackingAddsAPacketInToTheDropsOnly(t *testing.T) {
	controllers := func(c *Client, br *recordingBridge, ts ...*TableSpec) map[string]string {
		out := map[string]string{}
		for _, ts := range ts {
			for _, f := range br.inTable(c.p.Table(ts)) {
				if strings.Contains(f, "conj_id=") || ts == IngressDefaultRuleTable {
					out[f] = ""
				}
			}
		}
		return out
	}
	for _, deny := range []bool{true, false} {
		t.Run(fmt.Sprintf("deny tracking %v", deny), func(t *testing.T) {
			c, br := newUnitClient(t)
			c.SetDenyTracking(deny)
			peer := []netip.Prefix{netip.MustParsePrefix("10.20.0.5/32")}
			ch := PolicyChange{Rules: []RuleChange{
				{New: &PolicyRule{ID: 1, Direction: DirectionIngress, Peers: peer, AppliedTo: []uint32{10}, Action: ActionAllow, Tier: TierAntrea, Priority: 300}},
				{New: &PolicyRule{ID: 2, Direction: DirectionIngress, Peers: peer, AppliedTo: []uint32{11}, Action: ActionDrop, Tier: TierAntrea, Priority: 200}},
				{New: &PolicyRule{ID: 3, Direction: DirectionIngress, Peers: peer, AppliedTo: []uint32{12}, Action: ActionReject, Tier: TierAntrea, Priority: 100}},
			}}
			ch.Isolate[DirectionIngress] = []uint32{13}
			if _, err := c.ApplyPolicyChange(context.Background(), ch); err != nil {
				t.Fatal(err)
			}
			for f := range controllers(c, br, AntreaPolicyIngressRuleTable, IngressDefaultRuleTable) {
				pin := strings.Contains(f, "controller(")
				switch {
				case strings.Contains(f, "conj_id=1"):
					if pin {
						t.Errorf("the Allow rule sends a packet-in: %s", f)
					}
				case strings.Contains(f, "conj_id=2"), strings.Contains(f, "reg1=0xd"):
					// userdata: kind 2 (policy), flags 0x04 (deny).
					if pin != deny || deny && (!strings.Contains(f, fmt.Sprintf("meter_id=%d", PolicyDenyMeterID)) || !strings.Contains(f, "userdata=02.04.")) {
						t.Errorf("drop flow %s: want a packet-in flagged deny, metered by %d: %v", f, PolicyDenyMeterID, deny)
					}
				case strings.Contains(f, "conj_id=3"):
					flags := "userdata=02.02."
					if deny {
						flags = "userdata=02.06." // reject and deny
					}
					if !pin || !strings.Contains(f, fmt.Sprintf("meter_id=%d", PolicyRejectMeterID)) || !strings.Contains(f, flags) {
						t.Errorf("reject flow %s: want its packet-in (%s) metered by the reject meter", f, flags)
					}
				}
			}
		})
	}
}
