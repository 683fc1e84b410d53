package networkpolicy

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// NodePolicyWriter writes the rules of the policies applied to this Node
// itself (ClusterNetworkPolicies whose appliedTo is a nodeSelector), in
// evaluation order, into the node's netfilter (nodenet.NodePolicy, with
// the always-allowed traffic the agent set up). Each call carries the
// whole state.
type NodePolicyWriter interface {
	SetNodePolicy(ctx context.Context, rules []nodenet.NodePolicyRule) error
}

// nodeRule is one rule of a policy applied to this Node, with its place
// in evaluation order.
type nodeRule struct {
	order RuleOrder
	key   string // the controlplane rule's index and services
	rule  nodenet.NodePolicyRule
}

// nodePolicies is what this Node's netfilter holds of each policy: the
// Node's share of the policies, written as one rule list whenever one
// policy's share changes (nodenet rewrites its chains whole, atomically).
type nodePolicies struct {
	w NodePolicyWriter

	mu sync.Mutex
	// rules are the desired rules by policy; dirty: they differ from what
	// was written last (or nothing was written yet).
	rules map[string][]nodeRule
	dirty bool
}

// set records policy's rules (none: the policy has no rule on this Node)
// and writes the whole list when it is dirty, unless hold is set: while
// the policies known at start are being realized one by one the list is
// held back, so that a restarted agent replaces the previous run's rules
// with the whole new list at once, never with a part of it (a deny-all
// without the allow rules before it).
func (n *nodePolicies) set(ctx context.Context, policy string, rules []nodeRule, hold bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rules == nil {
		n.rules, n.dirty = map[string][]nodeRule{}, true
	}
	if !reflect.DeepEqual(rules, n.rules[policy]) && (len(rules) > 0 || len(n.rules[policy]) > 0) {
		if len(rules) == 0 {
			delete(n.rules, policy)
		} else {
			n.rules[policy] = rules
		}
		n.dirty = true
	}
	if hold || !n.dirty {
		return nil
	}
	list := flattenNodeRules(n.rules)
	if err := n.w.SetNodePolicy(ctx, list); err != nil {
		return fmt.Errorf("node policy rules (after policy %s): %w", policy, err)
	}
	klog.InfoS("Wrote the Node policy rules", "policy", policy, "policyRules", len(rules), "nodeRules", len(list))
	n.dirty = false
	return nil
}

// flattenNodeRules is every policy's rules in evaluation order: tier
// priority, policy priority, rule index; ties by policy name and rule key
// so that the order is stable.
func flattenNodeRules(byPolicy map[string][]nodeRule) []nodenet.NodePolicyRule {
	type entry struct {
		policy string
		r      nodeRule
	}
	var all []entry
	for p, rs := range byPolicy {
		for _, r := range rs {
			all = append(all, entry{p, r})
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(a.r.order.Compare(b.r.order), cmp.Compare(a.policy, b.policy), cmp.Compare(a.r.key, b.r.key))
	})
	out := make([]nodenet.NodePolicyRule, len(all))
	for i, e := range all {
		out[i] = e.r.rule
	}
	return out
}

// appliesToNodeLocked reports whether one of the applied-to groups holds
// this Node itself; ok is false while one has not arrived. c.mu is held.
func (c *ruleCache) appliesToNodeLocked(names []string) (applies, ok bool) {
	ok = true
	for _, g := range names {
		members, found := c.appliedToGroups[g]
		if !found {
			ok = false
			continue
		}
		if _, has := members["node:"+c.nodeName]; has && c.nodeName != "" {
			applies = true
		}
	}
	return applies, ok
}

// nodeRulesLocked are a rule's Node rules: one per set of services. Named
// ports resolve against the peers for egress (a Node has none for
// ingress: a rule of only named ports matches nothing). c.mu is held.
func nodeRulesLocked(p *cpv1beta2.NetworkPolicy, i int, peers []target) []nodeRule {
	r := &p.Rules[i]
	info := newRuleInfo(p, r)
	name := info.policy
	if info.name != "" {
		name += " " + info.name
	}
	egress := ruleDirection(r) == agentof.DirectionEgress
	buckets := map[string][]target{}
	bucketSvcs := map[string][]agentof.PolicyPort{}
	if egress {
		for _, t := range peers {
			svcs, ok := resolveServices(r.Services, t.ports)
			if !ok {
				continue
			}
			k := servicesKey(svcs)
			buckets[k] = append(buckets[k], t)
			bucketSvcs[k] = svcs
		}
	} else if svcs, ok := resolveServices(r.Services, nil); ok {
		k := servicesKey(svcs)
		buckets[k], bucketSvcs[k] = peers, svcs
	}
	var out []nodeRule
	for _, k := range slices.Sorted(maps.Keys(buckets)) {
		prefixes := peerPrefixes(buckets[k])
		if len(prefixes) == 0 {
			continue
		}
		out = append(out, nodeRule{order: ruleOrder(p, r), key: fmt.Sprintf("%d/%s", i, k), rule: nodenet.NodePolicyRule{
			Name: name, Egress: egress, Baseline: ruleTier(p) == agentof.TierBaseline, Action: nodeAction(ruleAction(r)),
			Peers: prefixes, Services: nodeServices(bucketSvcs[k]), Log: r.EnableLogging,
		}})
	}
	return out
}

func nodeAction(a agentof.RuleAction) nodenet.NodePolicyAction {
	switch a {
	case agentof.ActionDrop:
		return nodenet.NodePolicyDrop
	case agentof.ActionReject:
		return nodenet.NodePolicyReject
	case agentof.ActionPass:
		return nodenet.NodePolicyPass
	}
	return nodenet.NodePolicyAllow
}

func nodeServices(svcs []agentof.PolicyPort) []nodenet.NodePolicyService {
	var out []nodenet.NodePolicyService
	for _, s := range svcs {
		ns := nodenet.NodePolicyService{Protocol: s.Protocol, Port: s.Port, EndPort: s.EndPort, SrcPort: s.SrcPort, SrcEndPort: s.SrcEndPort}
		if s.HasICMPType {
			ns.ICMPType = &s.ICMPType
		}
		if s.HasICMPCode {
			ns.ICMPCode = &s.ICMPCode
		}
		out = append(out, ns)
	}
	return out
}
