package flowexporter

import (
	"net/netip"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/ipfix"
)

// PodLookup names the local pod that holds an IP. Only this node's pods
// are known: a record names the remote side's pod only after the Flow
// Aggregator joined both nodes' records.
type PodLookup interface {
	PodOf(ip netip.Addr) (namespace, name string, ok bool)
}

// ServiceLookup names the Service port ("namespace/name:port") a client
// reached at a ClusterIP, port and protocol (ServiceIndex).
type ServiceLookup interface {
	ServicePortName(ip netip.Addr, port uint16, proto uint8) (string, bool)
}

// InterfacePods is PodLookup on the agent's interface store.
type InterfacePods struct{ Store interfacestore.InterfaceStore }

// PodOf implements PodLookup.
func (p InterfacePods) PodOf(ip netip.Addr) (string, string, bool) {
	iface, ok := p.Store.GetInterfaceByIP(ip.String())
	if !ok || iface.Type != interfacestore.ContainerInterface || iface.ContainerInterfaceConfig == nil {
		return "", "", false
	}
	return iface.PodNamespace, iface.PodName, true
}

// enrich adds the rules (from the conntrack label), pod names and labels,
// the Service and the flow type to r. The
// destination is the endpoint, the reply's source (after a Service's DNAT).
func enrich(r *Record, pods PodLookup, svcs ServiceLookup, rules RuleLookup, labels LabelLookup) {
	if !r.Denied {
		in, eg := ruleIDs(r.Labels)
		r.Ingress, r.Egress = policyRule(rules, in), policyRule(rules, eg)
	}
	srcLocal, dstLocal := false, false
	if pods != nil {
		r.SrcNamespace, r.SrcPod, srcLocal = pods.PodOf(r.Orig.Src)
		r.DstNamespace, r.DstPod, dstLocal = pods.PodOf(r.Reply.Src)
	}
	if labels != nil {
		if srcLocal {
			r.SrcLabels, _ = labels.PodLabels(r.SrcNamespace, r.SrcPod)
		}
		if dstLocal {
			r.DstLabels, _ = labels.PodLabels(r.DstNamespace, r.DstPod)
		}
	}
	if svcs != nil && r.isDNAT() {
		r.ServicePortName, _ = svcs.ServicePortName(r.Orig.Dst, r.Orig.DstPort, r.Orig.Proto)
	}
	switch {
	case srcLocal && dstLocal:
		r.FlowType = ipfix.FlowTypeIntraNode
	case srcLocal:
		// Without the cluster's pod CIDRs a remote pod and an external
		// host look alike here; the aggregator corrects inter-node ones.
		r.FlowType = ipfix.FlowTypeToExternal
	case dstLocal:
		r.FlowType = ipfix.FlowTypeFromExternal
	}
}

// isDNAT says whether the connection's destination was translated (a
// Service): the reply does not come from the address dialled.
func (c *Connection) isDNAT() bool {
	return c.Reply.Src != c.Orig.Dst || c.Reply.SrcPort != c.Orig.DstPort
}
