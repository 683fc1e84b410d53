package networkpolicy

import (
	"antrea.io/antrea/pkg/agent/stats"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// Counts are the numbers of this node's slice of the computed policy, for
// the agent's metrics and its AntreaAgentInfo.
type Counts struct {
	NetworkPolicies, IngressRules, EgressRules int
	AddressGroups, AppliedToGroups             int
}

// Counts reads the rule cache: the policies whose span holds this node,
// their rules by direction, and the groups they use.
func (c *Controller) Counts() Counts {
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	n := Counts{NetworkPolicies: len(c.cache.policies), AddressGroups: len(c.cache.addressGroups),
		AppliedToGroups: len(c.cache.appliedToGroups)}
	for _, p := range c.cache.policies {
		for _, r := range p.Rules {
			if r.Direction == cpv1beta2.DirectionOut {
				n.EgressRules++
			} else {
				n.IngressRules++
			}
		}
	}
	return n
}

// RealizedRules returns the identity of every rule realized on this Node by
// its conjunction id (the id of its conj_id flow, whose counters the stats
// collector reads).
func (c *Controller) RealizedRules() map[uint32]stats.Rule { return c.reconciler.realizedRules() }
