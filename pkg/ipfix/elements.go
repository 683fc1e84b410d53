// Package ipfix encodes and decodes IPFIX messages (RFC 7011): the message
// header, template sets and data sets, with IANA's information elements and
// Antrea's enterprise-specific ones (private enterprise number 56506, the
// names, ids and types of upstream Antrea's registry), variable-length
// strings, and the framing of a message stream over TCP. The agent's
// FlowExporter (pkg/agent/flowexporter) encodes with it; tests and, later,
// the Flow Aggregator decode with it. It holds no sockets: a Writer appends
// messages to a buffer, a Session decodes the messages of one transport
// session.
package ipfix

import "fmt"

// DataType is an abstract data type of RFC 7012 section 3.1, numbered as in
// IANA's "IPFIX Information Element Data Types" registry.
type DataType uint8

// The data types this package encodes and decodes.
const (
	OctetArray      DataType = 0
	Unsigned8       DataType = 1
	Unsigned16      DataType = 2
	Unsigned32      DataType = 3
	Unsigned64      DataType = 4
	Signed32        DataType = 7
	Boolean         DataType = 11
	MACAddress      DataType = 12
	String          DataType = 13
	DateTimeSeconds DataType = 14
	DateTimeMillis  DataType = 15
	IPv4Address     DataType = 18
	IPv6Address     DataType = 19
)

// VariableLength is the field length of a variable-length element in a
// template (RFC 7011 section 7).
const VariableLength uint16 = 0xffff

// Private enterprise numbers.
const (
	// IANAEnterprise marks an IANA element (no enterprise bit).
	IANAEnterprise uint32 = 0
	// ReverseEnterprise is the PEN of reverse elements (RFC 5103 section
	// 6.1): the forward element's id under this number.
	ReverseEnterprise uint32 = 29305
	// AntreaEnterprise is Antrea's PEN (upstream's registry_antrea).
	AntreaEnterprise uint32 = 56506
)

// Element is an information element: its id and enterprise, its data type
// and the length it takes in a template (VariableLength for strings and
// octet arrays).
type Element struct {
	Name       string
	ID         uint16
	Enterprise uint32
	Type       DataType
	Length     uint16
}

func (e Element) String() string {
	if e.Name != "" {
		return e.Name
	}
	return fmt.Sprintf("%d/%d", e.Enterprise, e.ID)
}

// key identifies an element in the registry.
type key struct {
	ent uint32
	id  uint16
}

// fixedLength is the natural length of a type; 0 for variable-length types.
func fixedLength(t DataType) uint16 {
	switch t {
	case Unsigned8, Boolean:
		return 1
	case Unsigned16:
		return 2
	case Unsigned32, Signed32, DateTimeSeconds, IPv4Address:
		return 4
	case Unsigned64, DateTimeMillis:
		return 8
	case MACAddress:
		return 6
	case IPv6Address:
		return 16
	}
	return 0
}

func iana(name string, id uint16, t DataType) Element {
	return register(elem(name, id, IANAEnterprise, t))
}

func antrea(name string, id uint16, t DataType) Element {
	return register(elem(name, id, AntreaEnterprise, t))
}

func elem(name string, id uint16, ent uint32, t DataType) Element {
	l := fixedLength(t)
	if l == 0 {
		l = VariableLength
	}
	return Element{Name: name, ID: id, Enterprise: ent, Type: t, Length: l}
}

// registry holds the elements declared below, filled as the package's
// variables are initialized and read-only afterwards.
var registry = map[key]Element{}

func register(e Element) Element {
	registry[key{e.Enterprise, e.ID}] = e
	return e
}

// IANA elements (https://www.iana.org/assignments/ipfix), those the
// FlowExporter sends.
var (
	OctetDeltaCount          = iana("octetDeltaCount", 1, Unsigned64)
	PacketDeltaCount         = iana("packetDeltaCount", 2, Unsigned64)
	ProtocolIdentifier       = iana("protocolIdentifier", 4, Unsigned8)
	SourceTransportPort      = iana("sourceTransportPort", 7, Unsigned16)
	SourceIPv4Address        = iana("sourceIPv4Address", 8, IPv4Address)
	DestinationTransportPort = iana("destinationTransportPort", 11, Unsigned16)
	DestinationIPv4Address   = iana("destinationIPv4Address", 12, IPv4Address)
	SourceIPv6Address        = iana("sourceIPv6Address", 27, IPv6Address)
	FlowDirection            = iana("flowDirection", 61, Unsigned8)
	DestinationIPv6Address   = iana("destinationIPv6Address", 28, IPv6Address)
	OctetTotalCount          = iana("octetTotalCount", 85, Unsigned64)
	PacketTotalCount         = iana("packetTotalCount", 86, Unsigned64)
	FlowEndReason            = iana("flowEndReason", 136, Unsigned8)
	FlowStartSeconds         = iana("flowStartSeconds", 150, DateTimeSeconds)
	FlowEndSeconds           = iana("flowEndSeconds", 151, DateTimeSeconds)
)

// Reverse returns e's reverse element (RFC 5103): the counts of the
// connection's reply direction.
func Reverse(e Element) Element {
	r := e
	r.Enterprise = ReverseEnterprise
	r.Name = "reverse" + string(e.Name[0]-'a'+'A') + e.Name[1:]
	return r
}

// Reverse IANA elements the FlowExporter sends.
var (
	ReverseOctetDeltaCount  = register(Reverse(OctetDeltaCount))
	ReversePacketDeltaCount = register(Reverse(PacketDeltaCount))
	ReverseOctetTotalCount  = register(Reverse(OctetTotalCount))
	ReversePacketTotalCount = register(Reverse(PacketTotalCount))
)

// Antrea's elements (enterprise 56506), with upstream's names, ids and
// types (go-ipfix's registry_antrea).
var (
	SourcePodNamespace             = antrea("sourcePodNamespace", 100, String)
	SourcePodName                  = antrea("sourcePodName", 101, String)
	DestinationPodNamespace        = antrea("destinationPodNamespace", 102, String)
	DestinationPodName             = antrea("destinationPodName", 103, String)
	SourceNodeName                 = antrea("sourceNodeName", 104, String)
	DestinationNodeName            = antrea("destinationNodeName", 105, String)
	DestinationClusterIPv4         = antrea("destinationClusterIPv4", 106, IPv4Address)
	DestinationClusterIPv6         = antrea("destinationClusterIPv6", 107, IPv6Address)
	DestinationServicePort         = antrea("destinationServicePort", 108, Unsigned16)
	DestinationServicePortName     = antrea("destinationServicePortName", 109, String)
	IngressNetworkPolicyName       = antrea("ingressNetworkPolicyName", 110, String)
	IngressNetworkPolicyNamespace  = antrea("ingressNetworkPolicyNamespace", 111, String)
	EgressNetworkPolicyName        = antrea("egressNetworkPolicyName", 112, String)
	EgressNetworkPolicyNamespace   = antrea("egressNetworkPolicyNamespace", 113, String)
	IngressNetworkPolicyType       = antrea("ingressNetworkPolicyType", 115, Unsigned8)
	EgressNetworkPolicyType        = antrea("egressNetworkPolicyType", 118, Unsigned8)
	IngressNetworkPolicyRuleAction = antrea("ingressNetworkPolicyRuleAction", 139, Unsigned8)
	EgressNetworkPolicyRuleAction  = antrea("egressNetworkPolicyRuleAction", 140, Unsigned8)
	IngressNetworkPolicyRuleName   = antrea("ingressNetworkPolicyRuleName", 141, String)
	EgressNetworkPolicyRuleName    = antrea("egressNetworkPolicyRuleName", 142, String)
	TCPState                       = antrea("tcpState", 136, String)
	FlowType                       = antrea("flowType", 137, Unsigned8)
	// SourcePodLabels and DestinationPodLabels are the Pods' labels as a
	// JSON object, e.g. {"app":"web"}.
	SourcePodLabels      = antrea("sourcePodLabels", 143, String)
	DestinationPodLabels = antrea("destinationPodLabels", 144, String)
)

// Antrea's elements the Flow Aggregator adds to a correlated record
// (upstream's network-flow-visibility.md, "IEs from Antrea IE Registry"):
// each node's counts kept apart, throughputs in bits per second since the
// previous report, and each node's flowEndSeconds.
var (
	PacketTotalCountFromSourceNode             = antrea("packetTotalCountFromSourceNode", 120, Unsigned64)
	OctetTotalCountFromSourceNode              = antrea("octetTotalCountFromSourceNode", 121, Unsigned64)
	PacketDeltaCountFromSourceNode             = antrea("packetDeltaCountFromSourceNode", 122, Unsigned64)
	OctetDeltaCountFromSourceNode              = antrea("octetDeltaCountFromSourceNode", 123, Unsigned64)
	ReversePacketTotalCountFromSourceNode      = antrea("reversePacketTotalCountFromSourceNode", 124, Unsigned64)
	ReverseOctetTotalCountFromSourceNode       = antrea("reverseOctetTotalCountFromSourceNode", 125, Unsigned64)
	ReversePacketDeltaCountFromSourceNode      = antrea("reversePacketDeltaCountFromSourceNode", 126, Unsigned64)
	ReverseOctetDeltaCountFromSourceNode       = antrea("reverseOctetDeltaCountFromSourceNode", 127, Unsigned64)
	PacketTotalCountFromDestinationNode        = antrea("packetTotalCountFromDestinationNode", 128, Unsigned64)
	OctetTotalCountFromDestinationNode         = antrea("octetTotalCountFromDestinationNode", 129, Unsigned64)
	PacketDeltaCountFromDestinationNode        = antrea("packetDeltaCountFromDestinationNode", 130, Unsigned64)
	OctetDeltaCountFromDestinationNode         = antrea("octetDeltaCountFromDestinationNode", 131, Unsigned64)
	ReversePacketTotalCountFromDestinationNode = antrea("reversePacketTotalCountFromDestinationNode", 132, Unsigned64)
	ReverseOctetTotalCountFromDestinationNode  = antrea("reverseOctetTotalCountFromDestinationNode", 133, Unsigned64)
	ReversePacketDeltaCountFromDestinationNode = antrea("reversePacketDeltaCountFromDestinationNode", 134, Unsigned64)
	ReverseOctetDeltaCountFromDestinationNode  = antrea("reverseOctetDeltaCountFromDestinationNode", 135, Unsigned64)
	Throughput                                 = antrea("throughput", 145, Unsigned64)
	ReverseThroughput                          = antrea("reverseThroughput", 146, Unsigned64)
	ThroughputFromSourceNode                   = antrea("throughputFromSourceNode", 147, Unsigned64)
	ThroughputFromDestinationNode              = antrea("throughputFromDestinationNode", 148, Unsigned64)
	ReverseThroughputFromSourceNode            = antrea("reverseThroughputFromSourceNode", 149, Unsigned64)
	ReverseThroughputFromDestinationNode       = antrea("reverseThroughputFromDestinationNode", 150, Unsigned64)
	FlowEndSecondsFromSourceNode               = antrea("flowEndSecondsFromSourceNode", 151, Unsigned32)
	FlowEndSecondsFromDestinationNode          = antrea("flowEndSecondsFromDestinationNode", 152, Unsigned32)
)

// Values of flowType (upstream's registry).
const (
	FlowTypeIntraNode    uint8 = 1
	FlowTypeInterNode    uint8 = 2
	FlowTypeToExternal   uint8 = 3
	FlowTypeFromExternal uint8 = 4
)

// Values of ingress/egressNetworkPolicyType and ...RuleAction (upstream's
// registry).
const (
	PolicyTypeK8s                  uint8 = 1
	PolicyTypeAntreaNetworkPolicy  uint8 = 2
	PolicyTypeAntreaClusterNetwork uint8 = 3
	RuleActionAllow                uint8 = 1
	RuleActionDrop                 uint8 = 2
	RuleActionReject               uint8 = 3
)

// Values of flowEndReason (IANA registry "flowEndReason (Value 136)").
const (
	EndReasonIdleTimeout   uint8 = 1
	EndReasonActiveTimeout uint8 = 2
	EndReasonEndOfFlow     uint8 = 3
	EndReasonForcedEnd     uint8 = 4
	EndReasonLackResources uint8 = 5
)

// Lookup returns the registered element with id under enterprise ent.
func Lookup(ent uint32, id uint16) (Element, bool) {
	e, ok := registry[key{ent, id}]
	return e, ok
}

// NodeFlowElements are the elements of one Node's record of a connection, as
// upstream's FlowExporter sends them (IANA's 5-tuple, times, end reason and
// counts, reverse counts per RFC 5103, then Antrea's Pod, Node, Service, flow
// type, TCP state and Pod labels elements), for the family that src, dst and clusterIP
// (the IPv4 or the IPv6 elements) name. The agents' templates and the Flow
// Aggregator's start with them.
func NodeFlowElements(src, dst, clusterIP Element) []Element {
	return []Element{
		FlowStartSeconds, FlowEndSeconds, FlowEndReason,
		src, dst, SourceTransportPort, DestinationTransportPort, ProtocolIdentifier,
		PacketTotalCount, OctetTotalCount, PacketDeltaCount, OctetDeltaCount,
		ReversePacketTotalCount, ReverseOctetTotalCount, ReversePacketDeltaCount, ReverseOctetDeltaCount,
		SourcePodName, SourcePodNamespace, SourceNodeName,
		DestinationPodName, DestinationPodNamespace, DestinationNodeName,
		clusterIP, DestinationServicePort, DestinationServicePortName,
		FlowType, TCPState,
		SourcePodLabels, DestinationPodLabels,
	}
}

// PolicyElements name the NetworkPolicy rules that let a connection in
// (ingress) and out (egress); they end the agents' and the aggregator's
// templates.
func PolicyElements() []Element {
	return []Element{
		IngressNetworkPolicyName, IngressNetworkPolicyNamespace, IngressNetworkPolicyType,
		IngressNetworkPolicyRuleName, IngressNetworkPolicyRuleAction,
		EgressNetworkPolicyName, EgressNetworkPolicyNamespace, EgressNetworkPolicyType,
		EgressNetworkPolicyRuleName, EgressNetworkPolicyRuleAction,
	}
}
