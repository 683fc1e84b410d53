package networkpolicy

import (
	"net/netip"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// IGMP rules (upstream's: an Antrea-native rule whose protocols are igmp)
// are decided here, in the agent, not by flows: OVS cannot match the group
// of an IGMPv3 report, which travels inside it. The multicast controller
// (pkg/agent/multicast) asks before it takes a local pod's report or leave
// into account (egress rules) and before it sends the pod a query (ingress
// rules).

// IGMPAllowed says whether a local pod may send (egress: a report or a
// leave, of type igmpType about group) or receive (ingress: a query,
// group the zero address for a general one) an IGMP message: the first
// Antrea-native rule of that direction with the igmp protocol that applies
// to the pod and whose type and group match, in evaluation order (tier,
// policy priority, rule), decides; without one, the message passes.
func (c *Controller) IGMPAllowed(namespace, name string, egress bool, igmpType uint8, group netip.Addr) bool {
	return c.cache.igmpAllowed(namespace+"/"+name, egress, igmpType, group)
}

func (c *ruleCache) igmpAllowed(pod string, egress bool, igmpType uint8, group netip.Addr) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	groups := c.byPod[pod]
	if groups.Len() == 0 {
		return true
	}
	dir := agentof.DirectionIngress
	if egress {
		dir = agentof.DirectionEgress
	}
	var (
		found bool
		best  RuleOrder
		allow bool
	)
	for _, p := range c.policies {
		if isolates(p) {
			continue // K8s NetworkPolicies have no IGMP rules
		}
		for i := range p.Rules {
			r := &p.Rules[i]
			if ruleDirection(r) != dir || !igmpMatches(r.Services, igmpType, group) {
				continue
			}
			applied := r.AppliedToGroups
			if len(applied) == 0 {
				applied = p.AppliedToGroups
			}
			holds := false
			for _, g := range applied {
				if groups.Has(g) {
					holds = true
					break
				}
			}
			if !holds {
				continue
			}
			o := ruleOrder(p, r)
			if !found || o.Compare(best) < 0 {
				found, best = true, o
				allow = ruleAction(r) == agentof.ActionAllow
			}
		}
	}
	return !found || allow
}

// igmpMatches says whether one of a rule's services is the igmp protocol
// matching the message's type and group (an unset type or group matches
// any).
func igmpMatches(svcs []cpv1beta2.Service, igmpType uint8, group netip.Addr) bool {
	for _, s := range svcs {
		if s.Protocol == nil || *s.Protocol != cpv1beta2.ProtocolIGMP {
			continue
		}
		if s.IGMPType != nil && *s.IGMPType != int32(igmpType) {
			continue
		}
		if s.GroupAddress != "" {
			g, err := netip.ParseAddr(s.GroupAddress)
			if err != nil || g != group {
				continue
			}
		}
		return true
	}
	return false
}
