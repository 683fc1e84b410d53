package openflow

import (
	"context"
	"fmt"
	"slices"
	"sync"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// FQDN is the data-path half of toFQDN policy rules
// (pkg/agent/controller/networkpolicy/fqdn.go holds the rest): the DNS
// answers a local pod receives, on a port some toFQDN rule applies to, are
// paused at the head of AntreaPolicyIngressRule and sent to the agent
// (packet-in kind PacketInDNS, controller(pause)). The agent reads the
// answer, installs the rule's flows for the addresses it names, and only
// then resumes the packet (NXT_RESUME), which goes on from where it
// stopped, past the ingress rules as any reply does: the pod's first
// connection to an address it just looked up meets the flows that allow it.
//
// A flow per such port matches the replies of connections from source port
// 53 (UDP and TCP): ct_state +rpl, so only answers to the pod's own queries
// are read (a pod sending from port 53 to another cannot teach the agent a
// name). The feature has no table of its own.

// priorityDNSIntercept is above AntreaPolicyIngressRule's bypass of
// established traffic (priorityPolicyBypass), which a DNS answer is.
const priorityDNSIntercept = priorityPolicyBypass + 5

// dnsPort is the DNS port answers come from.
const dnsPort = 53

// fqdn is the FQDN feature: the DNS interception flows of the pod ports
// toFQDN rules apply to.
type fqdn struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow // one key: the interception flows
}

func newFQDN(d *datapath) *fqdn { return &fqdn{datapath: d, flows: map[string][]*binding.Flow{}} }

// Name implements Feature.
func (*fqdn) Name() string { return "FQDN" }

// Tables implements Feature: none, its flows sit in AntreaPolicyIngressRule.
func (*fqdn) Tables() []*TableSpec { return nil }

// PacketInKinds implements Feature: the paused DNS answers.
func (*fqdn) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInDNS} }

// Installed implements Feature: the interception flows, replayed after a
// switch restart.
func (f *fqdn) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, slices.Clone(f.flows["dns"])
}

// dnsFlows are the interception flows of the given pod ports: per family,
// port and transport, the answers from port 53 to the port.
func (f *fqdn) dnsFlows(n *NodeConfig, ports []uint32) []*binding.Flow {
	var out []*binding.Flow
	for _, fam := range n.families() {
		ip := ethType(fam)
		for _, port := range ports {
			for _, proto := range []uint8{binding.IPProtoUDP, binding.IPProtoTCP} {
				fl := f.b.flow(AntreaPolicyIngressRuleTable, priorityDNSIntercept, func(m *binding.Match) {
					m.EthType(ip).IPProto(proto).CTState(binding.CTStateTrk|binding.CTStateRpl, binding.CTStateTrk|binding.CTStateRpl)
					if proto == binding.IPProtoUDP {
						m.UDPSrc(dnsPort)
					} else {
						m.TCPSrc(dnsPort)
					}
					matchField(m, TargetOFPortField, port)
				}, binding.SendToController(PacketInDNS.userData(), true), f.b.pastPolicy(DirectionIngress))
				fl.Cookie = withRound(f.round, cookieFQDN)
				out = append(out, fl)
			}
		}
	}
	return out
}

// SetDNSInterceptPorts makes the DNS answers to exactly these local pod
// ports go through the agent (one bundle: the flows of the ports added and
// removed).
func (f *fqdn) SetDNSInterceptPorts(ctx context.Context, ports []uint32) error {
	n := f.node.Load()
	if n == nil {
		return fmt.Errorf("dns interception flows: pipeline not initialized")
	}
	ports = slices.Clone(ports)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	f.mu.Lock()
	defer f.mu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(f.flows, "dns", f.dnsFlows(n, ports)))
	return b.commit(ctx, f, "dns interception")
}
