package networkpolicy

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/interfacestore"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// The IGMP rules of upstream's multicast guide: an egress rule dropping a
// pod's reports for one group, an ingress rule dropping the queries to it;
// the first rule in evaluation order decides, a K8s NetworkPolicy has no
// say, other pods are untouched.
func TestIGMPRulesDecideInEvaluationOrder(t *testing.T) {
	c := newRuleCache()
	member := func(name string) cpv1beta2.GroupMember {
		return cpv1beta2.GroupMember{Pod: &cpv1beta2.PodReference{Namespace: "demo", Name: name}}
	}
	c.setGroupLocked(false, "atg-recv", map[string]cpv1beta2.GroupMember{"pod:demo/recv": member("recv")})
	c.setGroupLocked(false, "atg-other", map[string]cpv1beta2.GroupMember{"pod:demo/other": member("other")})
	igmp := cpv1beta2.ProtocolIGMP
	typ := func(v int32) *int32 { return &v }
	act := func(a cpv1beta2.RuleAction) *cpv1beta2.RuleAction { return &a }
	prio := func(v float64) *float64 { return &v }
	tier := func(v int32) *int32 { return &v }
	ref := &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "igmp"}
	c.policies["drop-reports"] = &cpv1beta2.NetworkPolicy{SourceRef: ref, TierPriority: tier(100), Priority: prio(5),
		AppliedToGroups: []string{"atg-recv"},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionOut, Action: act(cpv1beta2.RuleActionDrop),
				Services: []cpv1beta2.Service{{Protocol: &igmp, IGMPType: typ(0x22), GroupAddress: "225.1.2.3"}}},
			{Direction: cpv1beta2.DirectionIn, Action: act(cpv1beta2.RuleActionDrop),
				Services: []cpv1beta2.Service{{Protocol: &igmp, IGMPType: typ(0x11)}}},
		}}
	// Later in evaluation order (priority 10): allows what the first drops.
	c.policies["allow-all-igmp"] = &cpv1beta2.NetworkPolicy{SourceRef: ref, TierPriority: tier(100), Priority: prio(10),
		AppliedToGroups: []string{"atg-recv"},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionOut, Action: act(cpv1beta2.RuleActionAllow),
			Services: []cpv1beta2.Service{{Protocol: &igmp}}}}}
	g, other := netip.MustParseAddr("225.1.2.3"), netip.MustParseAddr("225.9.9.9")
	for _, tc := range []struct {
		name        string
		pod         string
		egress      bool
		typ         uint8
		group       netip.Addr
		wantAllowed bool
	}{
		{"recv's v3 report for 225.1.2.3 is dropped", "demo/recv", true, 0x22, g, false},
		{"recv's v3 report for another group falls to the later Allow", "demo/recv", true, 0x22, other, true},
		{"recv's v2 report for 225.1.2.3 is not of the dropped type", "demo/recv", true, 0x16, g, true},
		{"queries to recv are dropped", "demo/recv", false, 0x11, netip.IPv4Unspecified(), false},
		{"another pod's report passes", "demo/other", true, 0x22, g, true},
		{"another pod's queries pass", "demo/other", false, 0x11, netip.IPv4Unspecified(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.igmpAllowed(tc.pod, tc.egress, tc.typ, tc.group); got != tc.wantAllowed {
				t.Errorf("allowed = %t, want %t", got, tc.wantAllowed)
			}
		})
	}
}

// A logged IGMP Drop rule writes an audit line naming its policy and rule,
// as rules decided by flows do; a rule without enableLogging writes none.
func TestALoggedIGMPRuleWritesAnAuditLine(t *testing.T) {
	c := newRuleCache()
	c.setGroupLocked(false, "atg-recv", map[string]cpv1beta2.GroupMember{
		"pod:demo/recv": {Pod: &cpv1beta2.PodReference{Namespace: "demo", Name: "recv"}}})
	igmp, drop, v3 := cpv1beta2.ProtocolIGMP, cpv1beta2.RuleActionDrop, int32(0x22)
	c.policies["drop-join"] = &cpv1beta2.NetworkPolicy{
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "drop-join"},
		AppliedToGroups: []string{"atg-recv"},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Name: "drop-report", Direction: cpv1beta2.DirectionOut, Action: &drop, EnableLogging: true, LogLabel: "mcast",
				Services: []cpv1beta2.Service{{Protocol: &igmp, IGMPType: &v3, GroupAddress: "225.1.2.3"}}},
			{Name: "drop-queries", Direction: cpv1beta2.DirectionIn, Action: &drop,
				Services: []cpv1beta2.Service{{Protocol: &igmp}}},
		}}
	store := interfacestore.NewInterfaceStore()
	iface := interfacestore.NewContainerInterface("veth-recv", "c-recv", "recv", "demo", "eth0", nil, []net.IP{net.IPv4(10, 10, 1, 2)}, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: 5}
	store.AddInterface(iface)
	buf := &lockedBuffer{}
	ctrl := &Controller{cache: c, ifaces: store}
	ctrl.audit.Store(newAuditLoggerTo(buf, time.Millisecond))

	if ctrl.IGMPAllowed("demo", "recv", false, 0x11, netip.IPv4Unspecified()) {
		t.Errorf("the query to recv was allowed, want dropped by drop-queries")
	}
	if ctrl.IGMPAllowed("demo", "recv", true, 0x22, netip.MustParseAddr("225.1.2.3")) {
		t.Errorf("recv's report was allowed, want dropped by drop-report")
	}
	want := "MulticastEgressRule AntreaClusterNetworkPolicy:drop-join drop-report Egress Drop <nil> demo/recv 10.10.1.2 <nil> 225.1.2.3 <nil> IGMP <nil> mcast"
	deadline := time.Now().Add(5 * time.Second)
	for buf.String() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a line of the unlogged rule would be flushed by now too
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 1 || !strings.HasSuffix(got[0], want) {
		t.Errorf("audit log %q\nwant one line ending with %q", got, want)
	}
}
