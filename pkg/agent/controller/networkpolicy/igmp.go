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
//
// A rule with enableLogging that decides writes an audit log line, as
// rules decided by flows do: table MulticastEgressRule or
// MulticastIngressRule (upstream's tables of IGMP rules), the pod's IP as
// source for a report and destination for a query, the group as the
// other address (the zero address for a general query), protocol IGMP.
func (c *Controller) IGMPAllowed(namespace, name string, egress bool, igmpType uint8, group netip.Addr) bool {
	v := c.cache.igmpDecide(namespace+"/"+name, egress, igmpType, group)
	if v.policy != nil && v.rule.EnableLogging {
		if audit := c.audit.Load(); audit != nil {
			audit.log(c.igmpAuditEntry(namespace, name, egress, group, v))
		}
	}
	return v.allowed
}

// igmpVerdict is the decision on an IGMP message and the rule that made
// it (policy nil when no rule matched).
type igmpVerdict struct {
	allowed bool
	policy  *cpv1beta2.NetworkPolicy
	rule    *cpv1beta2.NetworkPolicyRule
}

// igmpAuditEntry is the audit log line of an IGMP rule's decision.
func (c *Controller) igmpAuditEntry(namespace, name string, egress bool, group netip.Addr, v igmpVerdict) *auditEntry {
	info := newRuleInfo(v.policy, v.rule)
	e := &auditEntry{table: "MulticastIngressRule", policy: info.policy, rule: info.name, direction: "Ingress",
		action: "Drop", appliedTo: namespace + "/" + name, protocol: "IGMP", label: info.logLabel,
		src: group, dst: netip.IPv4Unspecified()}
	if v.allowed {
		e.action = "Allow"
	}
	var podIP netip.Addr
	if c.ifaces != nil {
		for _, i := range c.ifaces.GetContainerInterfacesByPod(name, namespace) {
			for _, ip := range i.IPs {
				if a, ok := netip.AddrFromSlice(ip.To4()); ok && ip.To4() != nil {
					podIP = a
				}
			}
		}
	}
	if egress {
		e.table, e.direction, e.src, e.dst = "MulticastEgressRule", "Egress", podIP, group
	} else {
		e.dst = podIP
	}
	return e
}

func (c *ruleCache) igmpAllowed(pod string, egress bool, igmpType uint8, group netip.Addr) bool {
	return c.igmpDecide(pod, egress, igmpType, group).allowed
}

func (c *ruleCache) igmpDecide(pod string, egress bool, igmpType uint8, group netip.Addr) igmpVerdict {
	c.mu.RLock()
	defer c.mu.RUnlock()
	groups := c.byPod[pod]
	if groups.Len() == 0 {
		return igmpVerdict{allowed: true}
	}
	dir := agentof.DirectionIngress
	if egress {
		dir = agentof.DirectionEgress
	}
	var (
		best RuleOrder
		v    = igmpVerdict{allowed: true}
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
			if v.policy == nil || o.Compare(best) < 0 {
				best = o
				v = igmpVerdict{allowed: ruleAction(r) == agentof.ActionAllow, policy: p, rule: r}
			}
		}
	}
	return v
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
