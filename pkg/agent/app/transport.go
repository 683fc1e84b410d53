package app

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodeinit"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// findTransportInterface finds the node's transport interface when none is
// configured: the interface of the node's network namespace that holds the
// Node's InternalIP. With the netdev datapath a previous run moved that IP
// to br-phy's internal port; the transport interface is then the port that
// run recorded as the uplink on br-phy. It returns the interface and the IP.
func findTransportInterface(ctx context.Context, node *corev1.Node, conn *ovsconfig.Connection) (string, net.IP, error) {
	ip := nodeInternalIP(node)
	if ip == nil {
		return "", nil, fmt.Errorf("node %s has no InternalIP address: set transportInterface", node.Name)
	}
	link, err := linkWithIP(ip)
	if err != nil {
		return "", nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	if link == "" {
		return "", nil, fmt.Errorf("node %s: InternalIP %s is on no interface of the node: set transportInterface", node.Name, ip)
	}
	if link != nodeinit.DefaultUplinkBridgeName {
		return link, ip, nil
	}
	ports, err := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: link}).GetPortList(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("node %s: ports of %s: %w", node.Name, link, err)
	}
	uplink := recordedUplink(ports)
	if uplink == "" {
		return "", nil, fmt.Errorf("node %s: InternalIP %s is on %s, which has no port recorded as the uplink: set transportInterface", node.Name, ip, link)
	}
	return uplink, ip, nil
}

// nodeInternalIP returns the Node's first IPv4 InternalIP, else its first
// InternalIP, else nil.
func nodeInternalIP(node *corev1.Node) net.IP {
	var first net.IP
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		if ip == nil {
			continue
		}
		if ip.To4() != nil {
			return ip
		}
		if first == nil {
			first = ip
		}
	}
	return first
}

// linkWithIP names the link of the current network namespace that has ip,
// "" when none has.
func linkWithIP(ip net.IP) (string, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			link, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", fmt.Errorf("link %d of %s: %w", a.LinkIndex, ip, err)
			}
			return link.Attrs().Name, nil
		}
	}
	return "", nil
}

// recordedUplink is the port nodeinit recorded as the uplink (external_ids
// antrea-type=uplink), "" when there is none.
func recordedUplink(ports []ovsconfig.OVSPortData) string {
	for _, p := range ports {
		if p.ExternalIDs[interfacestore.ExternalIDType] == interfacestore.UplinkInterface.String() {
			return p.Name
		}
	}
	return ""
}
