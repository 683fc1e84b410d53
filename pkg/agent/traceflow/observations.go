package traceflow

import (
	"net"
	"strings"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// Namer names what a packet-in refers to.
type Namer interface {
	// Rule names a policy rule by conjunction id.
	Rule(id uint32) (policy, rule string, ok bool)
	// L7Rule names a layer 7 rule by its layer 7 id (its VLAN id on the
	// engine's port).
	L7Rule(id uint16) (policy, rule string, ok bool)
	// Isolation names the policies isolating a port in a direction.
	Isolation(port uint32, d agentof.Direction) []string
	// PodOfPort is "<namespace>/<name>" of the pod on a port, or "".
	PodOfPort(port uint32) string
}

// L7EngineInfo is the ComponentInfo of the observation of a layer 7 rule's
// steering: the packet was sent to the layer 7 engine (Forwarded) or, not
// TCP, dropped.
const L7EngineInfo = "L7Engine"

// Ports are this node's special ports.
type Ports struct {
	Gateway, Tunnel uint32
}

// terminal reports whether a packet-in ends the packet's path on this node.
func terminal(pi *agentof.TraceflowPacketIn) bool {
	switch pi.Point {
	case agentof.TraceflowRule, agentof.TraceflowL7Engine:
		return pi.Action == agentof.ActionDrop || pi.Action == agentof.ActionReject
	case agentof.TraceflowOutput, agentof.TraceflowNoOutput, agentof.TraceflowIsolation, agentof.TraceflowTableMiss:
		return true
	}
	return false
}

// Observe turns the packet-ins of one traced packet on this node (in the
// order the pipeline sent them, the last one terminal) into observations.
// sender says the packet was injected (or tagged) on this node.
func Observe(pins []*agentof.TraceflowPacketIn, sender bool, ports Ports, n Namer) []crdv1beta1.Observation {
	if len(pins) == 0 {
		return nil
	}
	var obs []crdv1beta1.Observation
	last := pins[len(pins)-1]
	if sender {
		if last.Point == agentof.TraceflowTableMiss && last.Table == agentof.SpoofGuardTable.Name {
			return []crdv1beta1.Observation{{Component: crdv1beta1.ComponentSpoofGuard, ComponentInfo: last.Table,
				Action: crdv1beta1.ActionDropped}}
		}
		obs = append(obs, crdv1beta1.Observation{Component: crdv1beta1.ComponentSpoofGuard, ComponentInfo: agentof.SpoofGuardTable.Name,
			Action: crdv1beta1.ActionForwarded})
	} else {
		obs = append(obs, crdv1beta1.Observation{Component: crdv1beta1.ComponentForwarding, ComponentInfo: agentof.ClassifierTable.Name,
			Action: crdv1beta1.ActionReceived})
	}
	// The load balancer chose an endpoint (Service destination): the
	// registers of any later packet-in say which.
	for _, pi := range pins {
		if pi.Endpoint.IsValid() {
			obs = append(obs, crdv1beta1.Observation{Component: crdv1beta1.ComponentLB, ComponentInfo: agentof.EndpointDNATTable.Name,
				Action: crdv1beta1.ActionForwarded, TranslatedDstIP: pi.Endpoint.String()})
			break
		}
	}
	for _, pi := range pins {
		switch pi.Point {
		case agentof.TraceflowRule:
			o := crdv1beta1.Observation{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: pi.Table}
			switch pi.Action {
			case agentof.ActionAllow:
				o.Action = crdv1beta1.ActionForwarded
			case agentof.ActionReject:
				o.Action = crdv1beta1.ActionRejected
			default:
				o.Action = crdv1beta1.ActionDropped
			}
			if policy, rule, ok := n.Rule(pi.RuleID); ok {
				o.NetworkPolicy, o.NetworkPolicyRule = policy, rule
			}
			obs = append(obs, o)
		case agentof.TraceflowL7Engine:
			// "L7Engine" (the audit log's table name for the engine's
			// verdicts): Forwarded to the engine by the named rule, which
			// judges the connection's requests; or Dropped, not TCP.
			o := crdv1beta1.Observation{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: L7EngineInfo,
				Action: crdv1beta1.ActionForwarded}
			if pi.Action == agentof.ActionDrop {
				o.Action = crdv1beta1.ActionDropped
			}
			if policy, rule, ok := n.L7Rule(pi.L7VLAN); ok {
				o.NetworkPolicy, o.NetworkPolicyRule = policy, rule
			}
			obs = append(obs, o)
		case agentof.TraceflowIsolation:
			port := pi.InPort
			if pi.Direction == agentof.DirectionIngress {
				port = pi.OutPort
			}
			o := crdv1beta1.Observation{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: pi.Table,
				Action: crdv1beta1.ActionDropped, NetworkPolicy: "K8sNetworkPolicy"}
			if names := n.Isolation(port, pi.Direction); len(names) > 0 {
				o.NetworkPolicy = strings.Join(names, ",")
			}
			obs = append(obs, o)
		case agentof.TraceflowTableMiss:
			obs = append(obs, crdv1beta1.Observation{Component: crdv1beta1.ComponentForwarding, ComponentInfo: pi.Table,
				Action: crdv1beta1.ActionDropped})
		case agentof.TraceflowNoOutput:
			obs = append(obs, crdv1beta1.Observation{Component: crdv1beta1.ComponentForwarding, ComponentInfo: pi.Table,
				Action: crdv1beta1.ActionDropped})
		case agentof.TraceflowOutput:
			obs = append(obs, output(pi, ports, n))
		}
	}
	return obs
}

// output is the observation of the Output table's decision.
func output(pi *agentof.TraceflowPacketIn, ports Ports, n Namer) crdv1beta1.Observation {
	o := crdv1beta1.Observation{Component: crdv1beta1.ComponentForwarding, ComponentInfo: pi.Table}
	if p, err := packetreply.Parse(pi.Packet.Data); err == nil {
		o.TTL = int32(p.TTL)
		o.DstMAC = net.HardwareAddr(p.Frame[0:6]).String()
	}
	port := pi.OutPort
	if pi.Hairpin {
		port = pi.InPort
	}
	switch {
	case ports.Tunnel != 0 && port == ports.Tunnel:
		o.Action = crdv1beta1.ActionForwarded
		if pi.TunnelDst.IsValid() {
			o.TunnelDstIP = pi.TunnelDst.String()
		}
	case port == ports.Gateway:
		o.Action = crdv1beta1.ActionForwardedOutOfOverlay
	default:
		o.Action = crdv1beta1.ActionDelivered
		o.Pod = n.PodOfPort(port)
	}
	return o
}

// MergeResult puts one node's result into a status: it replaces that
// node's earlier result (a re-injected packet reports again), keeping the
// other nodes' results and their order (the sender first).
func MergeResult(st *crdv1beta1.TraceflowStatus, r crdv1beta1.NodeResult) {
	for i := range st.Results {
		if st.Results[i].Node == r.Node {
			st.Results[i] = r
			return
		}
	}
	if r.Role == crdv1beta1.RoleSender {
		st.Results = append([]crdv1beta1.NodeResult{r}, st.Results...)
		return
	}
	st.Results = append(st.Results, r)
}
