// Package types holds the values and small types that more than one of the
// agent's datapath packages share, declared once: the virtual addresses the
// OpenFlow pipeline and the node's netfilter agree on (pkg/agent/openflow,
// pkg/agent/route, pkg/agent/nodenet), NodePorts, and the hostPort mappings
// the CNI server receives and the node's netfilter realizes. It imports
// nothing of the agent, so every datapath package may import it.
package types

import (
	"fmt"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// HairpinIP is the source address a pod sees on a connection it made to
// itself through a Service: without the source NAT the pod would receive a
// packet from its own address, which its kernel drops as martian. It is
// link-local, so it never collides with a pod, node or Service address.
// Service connections that enter from the gateway and leave through it
// again (an endpoint on a node's host network, or outside the cluster) are
// source-NATed to it too, so their replies come back through the bridge to
// be un-DNATed: the node routes it to the gateway through a neighbour
// pinned to GlobalVirtualMAC, and masquerades it when it leaves by another
// interface (pkg/agent/route, NodePath). Upstream's VirtualServiceIPv4.
var HairpinIP = netip.MustParseAddr("169.254.0.253")

// NodePortVirtualIP is where the node's netfilter DNATs NodePort traffic
// (to one of the node's addresses, from outside or from the node itself),
// keeping the port; the node routes it to the gateway through a neighbour
// pinned to GlobalVirtualMAC, and ServiceLB matches each NodePort on it. It
// is also the next hop of the node's routes to Service addresses (proxyAll).
// Upstream's VirtualNodePortDNATIPv4.
var NodePortVirtualIP = netip.MustParseAddr("169.254.0.252")

// GlobalVirtualMAC is the destination MAC of packets sent through the tunnel
// and the MAC the ARP responder gives for remote gateways; the node's
// neighbours of the virtual IPs are pinned to it.
var GlobalVirtualMAC = net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

// IP protocol numbers (IANA "Assigned Internet Protocol Numbers").
const (
	ProtocolTCP  uint8 = 6
	ProtocolUDP  uint8 = 17
	ProtocolSCTP uint8 = 132
)

// ProtocolName is the lower-case name of an IP protocol number, as nft and
// the CNI's portMappings spell it ("tcp"); the number for others.
func ProtocolName(p uint8) string {
	switch p {
	case ProtocolTCP:
		return "tcp"
	case ProtocolUDP:
		return "udp"
	case ProtocolSCTP:
		return "sctp"
	}
	return fmt.Sprint(p)
}

// NodePort is a Service's NodePort: an IP protocol number (ProtocolTCP,
// ProtocolUDP or ProtocolSCTP) and a port.
type NodePort struct {
	Protocol uint8
	Port     uint16
}

func (p NodePort) String() string { return fmt.Sprintf("%s/%d", ProtocolName(p.Protocol), p.Port) }

// PortMapping is one hostPort of a pod, as the container runtime passes it
// in the CNI's runtimeConfig.portMappings (the "portMappings" capability):
// connections to HostPort on HostIP — on every address of the node when
// HostIP is the zero Addr — go to ContainerPort on the pod's address.
type PortMapping struct {
	HostPort      uint16
	ContainerPort uint16
	// Protocol is ProtocolTCP or ProtocolUDP.
	Protocol uint8
	// HostIP is the node address the port is bound to; the zero Addr
	// (unset, 0.0.0.0 or ::) means every local address.
	HostIP netip.Addr
}

// String prints the mapping as "tcp 127.0.0.1:8080->80" (hostIP "*" when
// unset), the form errors and logs use.
func (m PortMapping) String() string {
	host := "*"
	if m.HostIP.IsValid() {
		host = m.HostIP.String()
	}
	if m.HostIP.Is6() {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s %s:%d->%d", ProtocolName(m.Protocol), host, m.HostPort, m.ContainerPort)
}

// Overlaps says whether two mappings claim the same node port: same
// protocol and host port, and the same host address or either unset (an
// unset one takes the port on every address of its family, and of the
// other's family when the other is set).
func (m PortMapping) Overlaps(o PortMapping) bool {
	if m.Protocol != o.Protocol || m.HostPort != o.HostPort {
		return false
	}
	return !m.HostIP.IsValid() || !o.HostIP.IsValid() || m.HostIP == o.HostIP
}

// NodeWireGuardPublicKeyAnnotation is the Node annotation in which an agent
// running trafficEncryptionMode wireGuard publishes its WireGuard public key
// (base64, as `wg pubkey` prints it); the other agents configure it as
// their peer for this Node's pod CIDRs. Upstream's name.
const NodeWireGuardPublicKeyAnnotation = "node.antrea.io/wireguard-public-key"

// NodeWireGuardBackendAnnotation says which WireGuard implementation the
// agent runs: "kernel" (the wireguard module) or "userspace" (wireguard-go
// behind a TUN device). antctl check installation reports it. Not upstream's:
// upstream runs the kernel module only.
const NodeWireGuardBackendAnnotation = "node.antrea.io/wireguard-backend"

// ServiceClusterIPs are a Service's ClusterIPs of every family (none when
// headless or without a ClusterIP); AntreaProxy and toServices rules read
// them alike.
func ServiceClusterIPs(svc *corev1.Service) []netip.Addr {
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
