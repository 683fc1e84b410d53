package openflow

import (
	"net"
	"net/netip"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// trafficEncapMode networkPolicyOnly (upstream's policy-only mode,
// docs/design/traffic-modes.md): another CNI (the primary) gave each pod its
// address and a route of everything through a gateway of its own choosing
// (ptp's first address of its range, AWS's 169.254.1.1, …), and routes pod
// traffic between nodes. Antrea's CNI, chained after it, moves the pod's
// host end into br-int and the node's route to the pod onto antrea-gw0, so
// all the pod's traffic crosses the pipeline. The pipeline then needs, beyond
// its usual flows, only what upstream's design names:
//   - an ARP responder answering every pod's request with the gateway's MAC,
//     so that a pod resolves whatever it takes for its gateway;
//   - a route to each local pod for what pods send to that MAC;
//   - everything else leaves through antrea-gw0 (L2ForwardingCalc already
//     sends the gateway's MAC there), and the node routes it as before.

// arpScratchField holds the requested address while an ARP request is
// turned into its reply: reg3 serves the IP pipeline's Service endpoints,
// never an ARP packet.
var arpScratchField = binding.Reg(3).All()

// policyOnlyNodeFlows are the node's ARP responder flows: the gateway's own
// ARP (the node resolving its pods) is switched as usual, every other
// request is answered with the gateway's MAC for the address it asks.
func (b *flowBuilder) policyOnlyNodeFlows(n *NodeConfig) []*binding.Flow {
	return []*binding.Flow{
		b.flow(ARPResponderTable, priorityLow+1, func(m *binding.Match) { m.InPort(n.GatewayOFPort).EthType(binding.EthTypeARP) },
			&binding.Output{Port: binding.PortNormal}),
		b.flow(ARPResponderTable, priorityLow, func(m *binding.Match) { m.EthType(binding.EthTypeARP).ARPOp(1) },
			move(binding.FieldEthSrc.All(), binding.FieldEthDst.All()),
			setEthSrc(n.GatewayMAC),
			load(binding.FieldARPOp.All(), 2),
			move(binding.FieldARPSha.All(), binding.FieldARPTha.All()),
			setARPSha(n.GatewayMAC),
			move(binding.FieldARPTpa.All(), arpScratchField),
			move(binding.FieldARPSpa.All(), binding.FieldARPTpa.All()),
			move(arpScratchField, binding.FieldARPSpa.All()),
			&binding.Output{Port: binding.PortInPort}),
	}
}

// policyOnlyPodFlow routes to local pod address a what was sent to the
// gateway's MAC (by another pod, or by the node): the pod's MAC, the
// gateway's as source, and the TTL decremented as any router does.
func (b *flowBuilder) policyOnlyPodFlow(n *NodeConfig, a netip.Addr, mac net.HardwareAddr) *binding.Flow {
	return b.flow(L3ForwardingTable, priorityNormal-1, func(m *binding.Match) {
		m.EthType(ethTypeOf(a)).EthDst(n.GatewayMAC).IPDst(a)
	}, setEthSrc(n.GatewayMAC), setEthDst(mac), load(PktDestinationField, ToLocal), load(RewriteMACField, on), b.next(L3ForwardingTable))
}
