package flowaggregator

import (
	"encoding/json"
	"net/netip"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// Counts are a direction's packets and bytes (IP bytes, headers included).
type Counts struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// NodeCounts are the counts one node reported: totals and deltas since its
// previous record, both directions.
type NodeCounts struct {
	Total        Counts `json:"total"`
	Delta        Counts `json:"delta"`
	ReverseTotal Counts `json:"reverseTotal"`
	ReverseDelta Counts `json:"reverseDelta"`
	// End is the node's flowEndSeconds.
	End time.Time `json:"end"`
}

// Flow is one record of a connection, as the aggregator keeps, exports and
// serves it: the 5-tuple (the destination is the endpoint, after a
// Service's DNAT), both Pods and Nodes when known, the Service, the counts
// of each node that reported it, throughput, and the NetworkPolicy fields
// (empty until the agents send them).
type Flow struct {
	Start     time.Time  `json:"flowStart"`
	End       time.Time  `json:"flowEnd"`
	EndReason uint8      `json:"flowEndReason"`
	SrcIP     netip.Addr `json:"sourceIP"`
	DstIP     netip.Addr `json:"destinationIP"`
	SrcPort   uint16     `json:"sourcePort"`
	DstPort   uint16     `json:"destinationPort"`
	Protocol  uint8      `json:"protocol"`

	SrcPod       string `json:"sourcePodName,omitempty"`
	SrcNamespace string `json:"sourcePodNamespace,omitempty"`
	SrcNode      string `json:"sourceNodeName,omitempty"`
	DstPod       string `json:"destinationPodName,omitempty"`
	DstNamespace string `json:"destinationPodNamespace,omitempty"`
	DstNode      string `json:"destinationNodeName,omitempty"`
	// SrcLabels and DstLabels are the Pods' labels (upstream's
	// sourcePodLabels and destinationPodLabels, a JSON object in IPFIX),
	// nil when the record does not name the Pod.
	SrcLabels map[string]string `json:"sourcePodLabels,omitzero"`
	DstLabels map[string]string `json:"destinationPodLabels,omitzero"`

	ClusterIP   netip.Addr `json:"destinationClusterIP,omitzero"`
	ServicePort uint16     `json:"destinationServicePort,omitempty"`
	// Service is "namespace/name:port" of the Service port dialled.
	Service string `json:"destinationServicePortName,omitempty"`

	FlowType uint8  `json:"flowType"`
	TCPState string `json:"tcpState,omitempty"`

	// FromSource and FromDestination are what each node reported (nil
	// when that node sent no record: an external peer, or a partner that
	// did not come in time). An intra-node record fills both.
	FromSource      *NodeCounts `json:"fromSourceNode,omitempty"`
	FromDestination *NodeCounts `json:"fromDestinationNode,omitempty"`

	// Throughput and ReverseThroughput are bytes per second since the
	// previous record of the connection (0 for the first one when it
	// started this second).
	Throughput        uint64 `json:"throughputBytesPerSecond"`
	ReverseThroughput uint64 `json:"reverseThroughputBytesPerSecond"`

	// Correlated says the record joins both nodes' records.
	Correlated bool `json:"correlated"`

	// IngressPolicy and EgressPolicy are the NetworkPolicies ("namespace/
	// name", or "name" for cluster-scoped ones) whose rules allowed the
	// connection into the destination Pod and out of the source Pod (from
	// the agents' records: the rule ids in the connection's conntrack
	// label), or denied it, with their type (ipfix.PolicyType*), rule name
	// and action (ipfix.RuleAction*: 1 allow, 2 drop, 3 reject). The
	// isolation of K8s NetworkPolicies (no rule allowed the connection to
	// or from a Pod they select) has type 1, action 2, no rule name, and the
	// isolating policies' names, comma-separated.
	IngressPolicy       string `json:"ingressNetworkPolicy,omitempty"`
	IngressPolicyType   uint8  `json:"ingressNetworkPolicyType,omitempty"`
	IngressPolicyRule   string `json:"ingressNetworkPolicyRuleName,omitempty"`
	IngressPolicyAction uint8  `json:"ingressNetworkPolicyRuleAction,omitempty"`
	EgressPolicy        string `json:"egressNetworkPolicy,omitempty"`
	EgressPolicyType    uint8  `json:"egressNetworkPolicyType,omitempty"`
	EgressPolicyRule    string `json:"egressNetworkPolicyRuleName,omitempty"`
	EgressPolicyAction  uint8  `json:"egressNetworkPolicyRuleAction,omitempty"`
	// Denied says a rule (or K8s NetworkPolicy isolation) dropped or
	// rejected the connection: an action is drop or reject.
	Denied bool `json:"denied,omitempty"`

	// Received is when the aggregator had the record complete.
	Received time.Time `json:"received"`
}

// denies says whether a rule action denies (drop or reject).
func denies(action uint8) bool {
	return action == ipfix.RuleActionDrop || action == ipfix.RuleActionReject
}

// labels reads a Pod's labels from their JSON object; nil for "" or
// anything that is not a JSON object of strings.
func labels(s string) map[string]string {
	if s == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil
	}
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// labelsJSON is the JSON object of a Pod's labels, "" for nil.
func labelsJSON(m map[string]string) string {
	if m == nil {
		return ""
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}

// counts returns the node counts a record carries: the source node's when
// it has one, else the destination node's.
func (f *Flow) counts() NodeCounts {
	if f.FromSource != nil {
		return *f.FromSource
	}
	if f.FromDestination != nil {
		return *f.FromDestination
	}
	return NodeCounts{}
}

// key identifies a connection: its 5-tuple and protocol.
type key struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
	proto            uint8
}

func (f *Flow) key() key {
	return key{src: f.SrcIP, dst: f.DstIP, srcPort: f.SrcPort, dstPort: f.DstPort, proto: f.Protocol}
}

// fromRecord reads an agent's record (pkg/agent/flowexporter's template).
// A record without a 5-tuple is refused.
func fromRecord(r ipfix.Record, now time.Time) (Flow, bool) {
	var f Flow
	u := func(e ipfix.Element) uint64 { v, _ := r.Get(e); return v.Uint }
	s := func(e ipfix.Element) string { v, _ := r.Get(e); return v.Str }
	addr := func(v4, v6 ipfix.Element) (netip.Addr, bool) {
		if v, ok := r.Get(v4); ok && v.Addr.IsValid() {
			return v.Addr, true
		}
		if v, ok := r.Get(v6); ok && v.Addr.IsValid() {
			return v.Addr, true
		}
		return netip.Addr{}, false
	}
	var ok1, ok2 bool
	f.SrcIP, ok1 = addr(ipfix.SourceIPv4Address, ipfix.SourceIPv6Address)
	f.DstIP, ok2 = addr(ipfix.DestinationIPv4Address, ipfix.DestinationIPv6Address)
	if !ok1 || !ok2 {
		return f, false
	}
	f.SrcPort, f.DstPort = uint16(u(ipfix.SourceTransportPort)), uint16(u(ipfix.DestinationTransportPort))
	f.Protocol = uint8(u(ipfix.ProtocolIdentifier))
	f.Start = time.Unix(int64(u(ipfix.FlowStartSeconds)), 0).UTC()
	f.End = time.Unix(int64(u(ipfix.FlowEndSeconds)), 0).UTC()
	f.EndReason = uint8(u(ipfix.FlowEndReason))
	f.SrcPod, f.SrcNamespace, f.SrcNode = s(ipfix.SourcePodName), s(ipfix.SourcePodNamespace), s(ipfix.SourceNodeName)
	f.DstPod, f.DstNamespace, f.DstNode = s(ipfix.DestinationPodName), s(ipfix.DestinationPodNamespace), s(ipfix.DestinationNodeName)
	if ip, ok := addr(ipfix.DestinationClusterIPv4, ipfix.DestinationClusterIPv6); ok && !ip.IsUnspecified() {
		f.ClusterIP = ip
	}
	f.ServicePort = uint16(u(ipfix.DestinationServicePort))
	f.Service = s(ipfix.DestinationServicePortName)
	f.FlowType = uint8(u(ipfix.FlowType))
	f.TCPState = s(ipfix.TCPState)
	f.SrcLabels, f.DstLabels = labels(s(ipfix.SourcePodLabels)), labels(s(ipfix.DestinationPodLabels))
	f.IngressPolicy = ref(s(ipfix.IngressNetworkPolicyNamespace), s(ipfix.IngressNetworkPolicyName))
	f.IngressPolicyType, f.IngressPolicyRule = uint8(u(ipfix.IngressNetworkPolicyType)), s(ipfix.IngressNetworkPolicyRuleName)
	f.IngressPolicyAction = uint8(u(ipfix.IngressNetworkPolicyRuleAction))
	f.EgressPolicy = ref(s(ipfix.EgressNetworkPolicyNamespace), s(ipfix.EgressNetworkPolicyName))
	f.EgressPolicyType, f.EgressPolicyRule = uint8(u(ipfix.EgressNetworkPolicyType)), s(ipfix.EgressNetworkPolicyRuleName)
	f.EgressPolicyAction = uint8(u(ipfix.EgressNetworkPolicyRuleAction))
	f.finish(&NodeCounts{
		Total:        Counts{u(ipfix.PacketTotalCount), u(ipfix.OctetTotalCount)},
		Delta:        Counts{u(ipfix.PacketDeltaCount), u(ipfix.OctetDeltaCount)},
		ReverseTotal: Counts{u(ipfix.ReversePacketTotalCount), u(ipfix.ReverseOctetTotalCount)},
		ReverseDelta: Counts{u(ipfix.ReversePacketDeltaCount), u(ipfix.ReverseOctetDeltaCount)},
		End:          f.End,
	}, now)
	return f, true
}

// ref names a policy as records show it: "namespace/name", "name" for a
// cluster-scoped one.
func ref(ns, name string) string {
	if name == "" || ns == "" {
		return name
	}
	return ns + "/" + name
}

// finish completes a record decoded from an agent's (IPFIX or gRPC): denied
// or not, and its counts c as the sending Node's.
func (f *Flow) finish(c *NodeCounts, now time.Time) {
	f.Denied = denies(f.IngressPolicyAction) || denies(f.EgressPolicyAction)
	// The node that sent it: the source Pod's when the record names one.
	switch {
	case f.FlowType == ipfix.FlowTypeIntraNode:
		d := *c
		f.FromSource, f.FromDestination = c, &d
	case f.SrcPod != "":
		f.FromSource = c
	default:
		f.FromDestination = c
	}
	f.Received = now
}
