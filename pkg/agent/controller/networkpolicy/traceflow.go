package networkpolicy

import (
	"sort"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// TraceflowRule names a realized rule by its conjunction id, for Traceflow
// observations: policy is "<type>:<namespace>/<name>" (or "<type>:<name>"),
// rule the rule's name. It reads the audit log's record under its read lock
// only, never waiting on an OVS write.
func (c *Controller) TraceflowRule(id uint32) (policy, rule string, ok bool) {
	info, ok := c.reconciler.ruleInfo(id)
	if !ok {
		return "", "", false
	}
	return info.policy, info.name, true
}

// TraceflowIsolation names the K8s NetworkPolicies that isolate a local
// port in a direction (their default drop dropped a traced packet).
func (c *Controller) TraceflowIsolation(port uint32, d agentof.Direction) []string {
	r := c.reconciler
	r.mu.Lock()
	var names []string
	for name, iso := range r.isolation {
		if iso[d].ports.Has(port) {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	out := make([]string, 0, len(names))
	for _, n := range names {
		if p := c.cache.policies[n]; p != nil && p.SourceRef != nil {
			ref := string(p.SourceRef.Type) + ":" + p.SourceRef.Name
			if p.SourceRef.Namespace != "" {
				ref = string(p.SourceRef.Type) + ":" + p.SourceRef.Namespace + "/" + p.SourceRef.Name
			}
			out = append(out, ref)
		}
	}
	sort.Strings(out)
	return out
}

// TraceflowL7Rule names the layer 7 rule with this layer 7 id (the one
// that sent a traced packet to the engine, or dropped it).
func (c *Controller) TraceflowL7Rule(id uint16) (policy, rule string, ok bool) {
	if c.l7 == nil {
		return "", "", false
	}
	c.l7.mu.Lock()
	defer c.l7.mu.Unlock()
	r, ok := c.l7.rules[id]
	if !ok {
		return "", "", false
	}
	return r.Policy, r.Name, true
}
