package networkpolicy

import (
	"net/netip"
	"testing"

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
