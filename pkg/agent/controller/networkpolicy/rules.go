package networkpolicy

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/agent/l7engine"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// target is one end of a rule that named ports resolve against: a local pod
// port (ingress) or a peer address (egress), with the member's named ports.
type target struct {
	port   uint32       // local OpenFlow port (ingress)
	prefix netip.Prefix // peer address (egress)
	ports  []cpv1beta2.NamedPort
	// nodePort, when its protocol is set, is a NodePort of a Service the
	// policy applies to (ingress; port is then 0).
	nodePort agentof.NodePort
}

// desiredPolicy is what one policy should have in OVS on this node.
type desiredPolicy struct {
	// rules by a key stable across computations (rule index and resolved
	// services), without ids: the reconciler owns those.
	rules map[string]*agentof.PolicyRule
	// orders are the evaluation order of the Antrea-native rules (by rule
	// key): the reconciler turns them into priorities.
	orders map[string]RuleOrder
	// infos say what each rule is, for audit log lines.
	infos map[string]ruleInfo
	// isolation is, per direction, the local ports the policy isolates and
	// whether it logs the packets their isolation drops: a K8s
	// NetworkPolicy whose rules of that direction log (its Namespace
	// enables logging; upstream logs these drops under the name
	// K8sNetworkPolicy).
	isolation [2]isolationSide
	// nodeRules are the policy's rules applied to this Node itself (a
	// nodeSelector appliedTo), for its netfilter (nodepolicy.go).
	nodeRules []nodeRule
	// complete is false while a group the policy references has not arrived.
	complete bool
	// generation of the policy computed (0: the policy is gone).
	generation int64
	// l7 are the engine's forms of the rules with l7Protocols, by rule
	// index (l7.go gives them their ids).
	l7 map[int]*l7engine.Rule
}

// noIsolation isolates no port in either direction.
func noIsolation() [2]isolationSide {
	return [2]isolationSide{{ports: sets.New[uint32]()}, {ports: sets.New[uint32]()}}
}

// desired computes a policy's rules and isolation from the cache (nil
// policy: nothing is desired). It holds the cache's read lock while it
// runs, which is CPU work only.
func (c *ruleCache) desired(name string, ifaces Interfaces) *desiredPolicy {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p := c.policies[name]
	if p == nil {
		return &desiredPolicy{rules: map[string]*agentof.PolicyRule{}, orders: map[string]RuleOrder{}, infos: map[string]ruleInfo{},
			isolation: noIsolation(), complete: true}
	}
	d := &desiredPolicy{orders: map[string]RuleOrder{}, infos: map[string]ruleInfo{}, generation: p.Generation}
	var iso [2]sets.Set[uint32]
	d.rules, iso, d.nodeRules, d.complete = c.computeRulesLocked(p, ifaces)
	for dir := range d.isolation {
		d.isolation[dir].ports = iso[dir]
	}
	if isolates(p) {
		for i := range p.Rules {
			if r := &p.Rules[i]; r.EnableLogging {
				d.isolation[ruleDirection(r)].logged = true
			}
		}
	}
	for i := range p.Rules {
		if l7 := l7Rule(p, &p.Rules[i]); l7 != nil {
			if d.l7 == nil {
				d.l7 = map[int]*l7engine.Rule{}
			}
			d.l7[i] = l7
		}
	}
	for k, r := range d.rules {
		i := ruleIndex(k)
		if r.Tier != agentof.TierK8s {
			d.orders[k] = ruleOrder(p, &p.Rules[i])
		}
		d.infos[k] = newRuleInfo(p, &p.Rules[i])
	}
	return d
}

// baselineTierPriority is the baseline Tier's priority (crd.antrea.io's
// static Tiers): its rules come after K8s NetworkPolicy.
const baselineTierPriority int32 = 253

// ruleTier is the table a policy's rules go in: K8s NetworkPolicies' own,
// the Antrea-native tiers' before it, or the baseline tier's after the K8s
// isolation drop.
func ruleTier(p *cpv1beta2.NetworkPolicy) agentof.PolicyTier {
	switch {
	case isolates(p):
		return agentof.TierK8s
	case p.TierPriority != nil && *p.TierPriority >= baselineTierPriority:
		return agentof.TierBaseline
	}
	return agentof.TierAntrea
}

// ruleOrder is an Antrea-native rule's place in evaluation order: the
// policy's tier priority and priority, the rule's index in its direction.
func ruleOrder(p *cpv1beta2.NetworkPolicy, r *cpv1beta2.NetworkPolicyRule) RuleOrder {
	o := RuleOrder{Rule: r.Priority}
	if p.TierPriority != nil {
		o.Tier = *p.TierPriority
	}
	if p.Priority != nil {
		o.Policy = *p.Priority
	}
	return o
}

// ruleIndex is the index of the controlplane rule a rule key names.
func ruleIndex(key string) int {
	var i int
	_, _ = fmt.Sscanf(key, "%d/", &i)
	return i
}

// ruleInfo names a rule in audit log lines (upstream's format).
type ruleInfo struct {
	// policy is "<type>:<namespace>/<name>" or "<type>:<name>".
	policy, name, logLabel string
	// ref is the user's policy (with its UID), for the stats reports.
	ref cpv1beta2.NetworkPolicyReference
}

func newRuleInfo(p *cpv1beta2.NetworkPolicy, r *cpv1beta2.NetworkPolicyRule) ruleInfo {
	ref := p.Name
	if s := p.SourceRef; s != nil {
		ref = string(s.Type) + ":" + s.Name
		if s.Namespace != "" {
			ref = string(s.Type) + ":" + s.Namespace + "/" + s.Name
		}
	}
	info := ruleInfo{policy: ref, name: r.Name, logLabel: r.LogLabel}
	if p.SourceRef != nil {
		info.ref = *p.SourceRef
	}
	return info
}

// isolates reports whether a policy isolates the pods it applies to: K8s
// NetworkPolicies do; Antrea-native policies do not by themselves (their
// Drop rules and baseline tier say what is denied).
func isolates(p *cpv1beta2.NetworkPolicy) bool {
	return p.SourceRef == nil || p.SourceRef.Type == cpv1beta2.K8sNetworkPolicy
}

// ruleAction maps a rule's action to the data path's (nil, as K8s
// NetworkPolicy rules have, is Allow).
func ruleAction(r *cpv1beta2.NetworkPolicyRule) agentof.RuleAction {
	if r.Action == nil {
		return agentof.ActionAllow
	}
	switch *r.Action {
	case cpv1beta2.RuleActionDrop:
		return agentof.ActionDrop
	case cpv1beta2.RuleActionReject:
		return agentof.ActionReject
	case cpv1beta2.RuleActionPass:
		return agentof.ActionPass
	}
	return agentof.ActionAllow
}

// computeRulesLocked turns a policy into this node's rules, keyed by a
// stable rule key, and the local ports it isolates per direction. complete
// is false while a group the policy references has not arrived yet. c.mu
// is held (read).
func (c *ruleCache) computeRulesLocked(p *cpv1beta2.NetworkPolicy, ifaces Interfaces) (map[string]*agentof.PolicyRule, [2]sets.Set[uint32], []nodeRule, bool) {
	out := map[string]*agentof.PolicyRule{}
	var nodeRules []nodeRule
	iso := [2]sets.Set[uint32]{sets.New[uint32](), sets.New[uint32]()}
	complete := true
	for i := range p.Rules {
		r := &p.Rules[i]
		atNames := p.AppliedToGroups
		if len(r.AppliedToGroups) > 0 {
			atNames = r.AppliedToGroups
		}
		applied, ok := c.appliedTargetsLocked(atNames, ifaces)
		complete = complete && ok
		dir, peer := ruleDirection(r), r.From
		if dir == agentof.DirectionEgress {
			peer = r.To
		}
		if isolates(p) {
			for _, t := range applied {
				if t.port != 0 {
					iso[dir].Insert(t.port)
				}
			}
		}
		onNode, ok := c.appliesToNodeLocked(atNames)
		complete = complete && ok
		if len(applied) == 0 && !onNode {
			continue
		}
		peers, ok := c.peerTargetsLocked(peer)
		complete = complete && ok
		if onNode {
			nodeRules = append(nodeRules, nodeRulesLocked(p, i, peers)...)
		}
		if len(applied) == 0 {
			continue // the rule applies to this Node only
		}
		for k, pr := range bucketRules(r, dir, ruleAction(r), ruleTier(p), applied, peers) {
			out[fmt.Sprintf("%d/%s", i, k)] = pr
		}
		if dir == agentof.DirectionEgress && len(r.To.ToServices) > 0 {
			// toServices (toservices.go): the Services' frontends are the
			// peers; admission refuses ports and other peers beside them.
			if fes := c.toServicesFrontendsLocked(r.To.ToServices); len(fes) > 0 {
				pr := &agentof.PolicyRule{Direction: dir, Action: ruleAction(r), Tier: ruleTier(p),
					Priority: agentof.PolicyRulePriority, Log: r.EnableLogging, ToServices: fes}
				pr.AppliedTo, _ = appliedPorts(applied)
				if len(pr.AppliedTo) > 0 {
					out[fmt.Sprintf("%d/toServices", i)] = pr
				}
			}
		}
		if hasFQDN(r) {
			// toFQDN names that answered Services' ClusterIPs
			// (fqdnservices.go).
			base := agentof.PolicyRule{Direction: dir, Action: ruleAction(r), Tier: ruleTier(p),
				Priority: agentof.PolicyRulePriority, Log: r.EnableLogging}
			base.AppliedTo, _ = appliedPorts(applied)
			for k, pr := range c.fqdnServiceRulesLocked(r, base) {
				out[fmt.Sprintf("%d/fqdnServices/%s", i, k)] = pr
			}
		}
	}
	return out, iso, nodeRules, complete
}

// appliedTargetsLocked are the local pods' ports (with their named ports)
// and the NodePorts of the applied-to groups; ok is false while one of the
// groups has not arrived. c.mu is held (read).
func (c *ruleCache) appliedTargetsLocked(names []string, ifaces Interfaces) (applied []target, ok bool) {
	ok = true
	for _, g := range names {
		members, found := c.appliedToGroups[g]
		if !found {
			ok = false
			continue
		}
		for _, m := range members {
			if m.Service != nil {
				// A policy applied to a NodePort Service: the member
				// carries the Service's NodePorts, served on every node.
				for _, np := range m.Ports {
					if num, valid := protocolNumber(np.Protocol); valid && np.Port > 0 && np.Port <= 0xffff {
						applied = append(applied, target{nodePort: agentof.NodePort{Protocol: num, Port: uint16(np.Port)}})
					}
				}
				continue
			}
			if m.Pod == nil {
				continue
			}
			for _, iface := range ifaces.GetContainerInterfacesByPod(m.Pod.Name, m.Pod.Namespace) {
				if iface.OVSPortConfig != nil && iface.OFPort > 0 {
					applied = append(applied, target{port: uint32(iface.OFPort), ports: m.Ports})
				}
			}
		}
	}
	return applied, ok
}

// peerTargetsLocked are a rule peer's addresses (IPv4 members of its
// address groups, with their named ports, its ipBlocks and the addresses
// learned for its FQDN patterns); ok is false
// while one of the groups has not arrived. c.mu is held (read).
func (c *ruleCache) peerTargetsLocked(peer cpv1beta2.NetworkPolicyPeer) (peers []target, ok bool) {
	ok = true
	for _, g := range peer.AddressGroups {
		members, found := c.addressGroups[g]
		if !found {
			ok = false
			continue
		}
		for _, m := range members {
			for _, ip := range m.IPs {
				a, valid := netip.AddrFromSlice(ip)
				if !valid {
					continue
				}
				a = a.Unmap()
				if !agentof.Realizes(agenttypes.FamilyOf(a)) {
					continue
				}
				peers = append(peers, target{prefix: netip.PrefixFrom(a, a.BitLen()), ports: m.Ports})
			}
		}
	}
	for _, b := range peer.IPBlocks {
		for _, pfx := range ipBlockPrefixes(b) {
			peers = append(peers, target{prefix: pfx})
		}
	}
	if len(peer.FQDNs) > 0 && c.fqdn != nil {
		// The addresses learned so far for the names the patterns match.
		for _, a := range c.fqdn.addrs(peer.FQDNs) {
			if agentof.Realizes(agenttypes.FamilyOf(a)) {
				peers = append(peers, target{prefix: netip.PrefixFrom(a, a.BitLen())})
			}
		}
	}
	return peers, ok
}

// bucketRules are a controlplane rule's data-path rules, by services key.
// Named ports resolve against the rule's destination: the applied-to pods
// for ingress, the peers for egress. Destinations that resolve to the same
// services share one rule; a rule without peers matches nothing and is
// left out (isolation only).
func bucketRules(r *cpv1beta2.NetworkPolicyRule, dir agentof.Direction, action agentof.RuleAction, tier agentof.PolicyTier,
	applied, peers []target) map[string]*agentof.PolicyRule {
	resolveOn, other := applied, peers
	if dir == agentof.DirectionEgress {
		resolveOn, other = peers, applied
	}
	buckets := map[string][]target{}
	bucketSvcs := map[string][]agentof.PolicyPort{}
	for _, t := range resolveOn {
		svcs, ok := resolveServices(r.Services, t.ports)
		if !ok {
			continue // every service names a port this member lacks
		}
		k := servicesKey(svcs)
		buckets[k] = append(buckets[k], t)
		bucketSvcs[k] = svcs
	}
	out := map[string]*agentof.PolicyRule{}
	for k, ts := range buckets {
		// The reconciler gives Antrea-native rules their priority.
		pr := &agentof.PolicyRule{Direction: dir, Services: bucketSvcs[k], Action: action, Tier: tier,
			Priority: agentof.PolicyRulePriority, Log: r.EnableLogging}
		at, pe := ts, other
		if dir == agentof.DirectionEgress {
			at, pe = other, ts
		}
		pr.AppliedTo, pr.NodePorts = appliedPorts(at)
		pr.Peers = peerPrefixes(pe)
		if len(pr.Peers) == 0 {
			continue
		}
		out[k] = pr
	}
	return out
}

// appliedPorts are the sorted local ports and NodePorts of applied-to targets.
func appliedPorts(at []target) ([]uint32, []agentof.NodePort) {
	ports := sets.New[uint32]()
	nodePorts := sets.New[agentof.NodePort]()
	for _, t := range at {
		if t.nodePort.Protocol != 0 {
			nodePorts.Insert(t.nodePort)
		} else {
			ports.Insert(t.port)
		}
	}
	var nps []agentof.NodePort
	if nodePorts.Len() > 0 {
		nps = nodePorts.UnsortedList()
		slices.SortFunc(nps, func(a, b agentof.NodePort) int {
			return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
		})
	}
	return sets.List(ports), nps
}

// peerPrefixes are the distinct prefixes of peer targets, sorted by text.
func peerPrefixes(pe []target) []netip.Prefix {
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, t := range pe {
		if !seen[t.prefix] {
			seen[t.prefix] = true
			out = append(out, t.prefix)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ruleDirection is the data path's direction of a rule.
func ruleDirection(r *cpv1beta2.NetworkPolicyRule) agentof.Direction {
	if r.Direction == cpv1beta2.DirectionOut {
		return agentof.DirectionEgress
	}
	return agentof.DirectionIngress
}

// resolveServices resolves a rule's services for one destination member:
// numeric ports stay, named ports become the member's port of that name and
// protocol; source ports and ICMP type and code are kept. ok is false when
// the rule has services and none resolves.
func resolveServices(svcs []cpv1beta2.Service, named []cpv1beta2.NamedPort) ([]agentof.PolicyPort, bool) {
	if len(svcs) == 0 {
		return nil, true
	}
	var out []agentof.PolicyPort
	for _, s := range svcs {
		proto := cpv1beta2.ProtocolTCP
		if s.Protocol != nil {
			proto = *s.Protocol
		}
		num, ok := protocolNumber(proto)
		if !ok {
			continue
		}
		as := agentof.PolicyPort{Protocol: num}
		if s.Port != nil {
			if s.Port.Type == intstr.String {
				found := false
				for _, np := range named {
					if np.Name == s.Port.StrVal && (np.Protocol == proto || (np.Protocol == "" && proto == cpv1beta2.ProtocolTCP)) {
						as.Port, found = uint16(np.Port), true
						break
					}
				}
				if !found {
					continue
				}
			} else {
				as.Port = uint16(s.Port.IntVal)
				if s.EndPort != nil && *s.EndPort > s.Port.IntVal {
					as.EndPort = uint16(*s.EndPort)
				}
			}
		}
		if s.SrcPort != nil {
			as.SrcPort = uint16(*s.SrcPort)
			if s.SrcEndPort != nil && *s.SrcEndPort > *s.SrcPort {
				as.SrcEndPort = uint16(*s.SrcEndPort)
			}
		}
		if proto == cpv1beta2.ProtocolICMP {
			if s.ICMPType != nil {
				as.HasICMPType, as.ICMPType = true, uint8(*s.ICMPType)
			}
			if s.ICMPCode != nil {
				as.HasICMPCode, as.ICMPCode = true, uint8(*s.ICMPCode)
			}
		}
		out = append(out, as)
	}
	return out, len(out) > 0
}

func protocolNumber(p cpv1beta2.Protocol) (uint8, bool) {
	switch p {
	case cpv1beta2.ProtocolTCP:
		return binding.IPProtoTCP, true
	case cpv1beta2.ProtocolUDP:
		return binding.IPProtoUDP, true
	case cpv1beta2.ProtocolSCTP:
		return binding.IPProtoSCTP, true
	case cpv1beta2.ProtocolICMP:
		return binding.IPProtoICMP, true
	}
	return 0, false
}

func servicesKey(svcs []agentof.PolicyPort) string {
	parts := make([]string, 0, len(svcs))
	for _, s := range svcs {
		parts = append(parts, fmt.Sprintf("%d:%d-%d:%d-%d:%t%d/%t%d", s.Protocol, s.Port, s.EndPort, s.SrcPort, s.SrcEndPort,
			s.HasICMPType, s.ICMPType, s.HasICMPCode, s.ICMPCode))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// ipBlockPrefixes is an ipBlock's CIDR minus its excepts, as a set of
// disjoint prefixes of the CIDR's family (flows cannot say "except"); none
// for a family the pipeline does not realize.
func ipBlockPrefixes(b cpv1beta2.IPBlock) []netip.Prefix {
	base, ok := toPrefix(b.CIDR)
	if !ok || !agentof.Realizes(agenttypes.FamilyOf(base.Addr())) {
		return nil
	}
	out := []netip.Prefix{base.Masked()}
	for _, e := range b.Except {
		ex, ok := toPrefix(e)
		if !ok || agenttypes.FamilyOf(ex.Addr()) != agenttypes.FamilyOf(base.Addr()) {
			continue
		}
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtract(p, ex.Masked())...)
		}
		out = next
	}
	return out
}

func toPrefix(n cpv1beta2.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(net.IP(n.IP))
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a.Unmap(), int(n.PrefixLength)), true
}

// subtract returns p minus ex as disjoint prefixes.
func subtract(p, ex netip.Prefix) []netip.Prefix {
	if !p.Overlaps(ex) {
		return []netip.Prefix{p}
	}
	if ex.Bits() <= p.Bits() {
		return nil // ex covers p
	}
	// Split p in halves and keep the half without ex whole.
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	b := p.Addr().AsSlice() // 4 or 16 bytes: the family stays
	bit := p.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	hiAddr, _ := netip.AddrFromSlice(b)
	hi := netip.PrefixFrom(hiAddr, p.Bits()+1)
	return append(subtract(lo, ex), subtract(hi, ex)...)
}
