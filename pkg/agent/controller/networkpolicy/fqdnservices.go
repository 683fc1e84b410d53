package networkpolicy

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// A toFQDN rule naming a Service (`fqdn: "web.prod.svc.cluster.local"`, or
// a pattern matching such names): the cluster DNS answers the Service's
// ClusterIP, and the pod connects to it; AntreaProxy's EndpointDNAT has
// rewritten the destination to the endpoint it chose by the time the egress
// rules see the packet, so a match on the answered address alone never
// meets the connection (upstream's toFQDN has this gap). Each answered
// address that is a ClusterIP therefore also gives the rule the Service's
// frontends at that address, matched on conntrack's original destination
// as toServices' are (serviceFrontendMatch). The rule's ports are the
// Service's ports here, the ports the pod dialled: a numeric port or range
// keeps the frontends it covers, a named port those whose targetPort has
// that name; source ports stay a clause of their own.

// fqdnServiceRulesLocked are the data-path rules of the Services a toFQDN
// egress rule's names answered, by key ("%d/fqdnServices/…" in
// computeLocked's map): one rule per distinct source-port restriction.
// c.mu is held (read).
func (c *ruleCache) fqdnServiceRulesLocked(r *cpv1beta2.NetworkPolicyRule, base agentof.PolicyRule) map[string]*agentof.PolicyRule {
	if c.services == nil || c.fqdn == nil || !hasFQDN(r) || len(base.AppliedTo) == 0 {
		return nil
	}
	out := map[string]*agentof.PolicyRule{}
	for _, a := range c.fqdn.addrs(r.To.FQDNs) {
		if !agentof.Realizes(agenttypes.FamilyOf(a)) {
			continue
		}
		for _, fe := range c.services.FrontendsAt(a) {
			src, ok := frontendPorts(r.Services, fe)
			if !ok {
				continue
			}
			k := servicesKey(src)
			pr := out[k]
			if pr == nil {
				cp := base
				cp.Services, cp.ToServices, cp.Peers = src, nil, nil
				pr = &cp
				out[k] = pr
			}
			pr.ToServices = append(pr.ToServices, fe.ServicePort)
		}
	}
	for _, pr := range out {
		slices.SortFunc(pr.ToServices, compareFrontends)
		pr.ToServices = slices.Compact(pr.ToServices)
	}
	return out
}

// frontendPorts decides whether a rule's ports admit a Service frontend,
// the port the pod dialled (ok), and returns the source-port clause that
// still applies: nil when a port admitting it has no source restriction.
func frontendPorts(svcs []cpv1beta2.Service, fe ServiceFrontend) (src []agentof.PolicyPort, ok bool) {
	if len(svcs) == 0 {
		return nil, true
	}
	// A named port resolves to the frontend's own port when the
	// Service's targetPort has that name.
	var named []cpv1beta2.NamedPort
	if fe.TargetPortName != "" {
		named = []cpv1beta2.NamedPort{{Name: fe.TargetPortName, Port: int32(fe.Port), Protocol: cpv1beta2.Protocol(protocolName(fe.Protocol))}}
	}
	resolved, _ := resolveServices(svcs, named)
	for _, pp := range resolved {
		if pp.Protocol != fe.Protocol {
			continue
		}
		if pp.Port != 0 && (fe.Port < pp.Port || fe.Port > max(pp.EndPort, pp.Port)) {
			continue
		}
		if pp.SrcPort == 0 {
			return nil, true
		}
		src = append(src, agentof.PolicyPort{Protocol: pp.Protocol, SrcPort: pp.SrcPort, SrcEndPort: pp.SrcEndPort})
	}
	return src, len(src) > 0
}

// fqdnPolicies are the policies with a toFQDN rule: a Service that changes
// may change the frontends their answered addresses lead to.
func (c *ruleCache) fqdnPolicies() sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := sets.New[string]()
	for name, p := range c.policies {
		for i := range p.Rules {
			if hasFQDN(&p.Rules[i]) {
				out.Insert(name)
				break
			}
		}
	}
	return out
}
