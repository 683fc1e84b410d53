// Package nodeinit brings a node's Open vSwitch to the state the agent
// needs before it serves CNI or programs flows: the integration bridge br-int,
// the gateway antrea-gw0 (the first address of the node's pod CIDR), the
// flow-based tunnel port antrea-tun0 and, for the userspace (netdev)
// datapath, the underlay bridge br-phy that holds the node's uplink and its IP
// (userspace tunnels route through an OVS internal port, see ENVIRONMENT.md).
//
// Bringup is idempotent: a second run compares and leaves everything that is
// already right alone (same OVSDB UUIDs, no link taken down), so the agent
// runs it on every start. It runs in the calling thread's network namespace,
// which is the node's: the agent runs inside it.
package nodeinit

import (
	"context"
	"net"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// Default names, as upstream Antrea uses them.
const (
	DefaultBridgeName       = "br-int"
	DefaultUplinkBridgeName = "br-phy"
	DefaultGatewayName      = "antrea-gw0"
	DefaultTunnelName       = "antrea-tun0"
)

// OpenFlow port numbers requested for the ports Antrea's pipeline refers to
// by number (upstream's config.DefaultTunOFPort and HostGatewayOFPort).
const (
	TunnelOFPort  int32 = 1
	GatewayOFPort int32 = 2
)

// Config says what to bring up.
type Config struct {
	// NodeName names the node; it seeds the stable gateway MAC.
	NodeName string
	// OVSDBEndpoint is the ovsdb-server address ("unix:PATH").
	OVSDBEndpoint string
	// Conn, when set, is used instead of connecting to OVSDBEndpoint (and is
	// left open); the agent shares its connection this way.
	Conn *ovsconfig.Connection
	// OVSRunDir is the run directory of ovs-vswitchd, where its control socket
	// lives (for ovs-appctl).
	OVSRunDir string
	// DatapathType is netdev (userspace) or system (kernel).
	DatapathType ovsconfig.OVSDatapathType
	// TunnelType is the encapsulation; "" means Geneve.
	TunnelType ovsconfig.TunnelType
	// TunnelCSum asks for outer UDP checksums on the tunnel.
	TunnelCSum bool
	// NoTunnel (trafficEncapMode noEncap): the underlay routes pod traffic
	// between nodes; there is no tunnel port (one left by an earlier run is
	// removed) and the pod MTU is the uplink's.
	NoTunnel bool
	// NoUnderlayBridge (trafficEncapMode networkPolicyOnly): another CNI
	// carries pod traffic between nodes through the node's kernel, so
	// nothing is encapsulated in userspace and the uplink keeps its
	// addresses (no br-phy, even with netdev).
	NoUnderlayBridge bool
	// GatewayHasNodeIP (networkPolicyOnly): Antrea has no pod CIDR on the
	// node (the primary CNI allocates, maybe from none); the gateway gets
	// the node's transport address as a host address (/32), so that what
	// the node sends to its pods through it leaves with that address, as
	// upstream's policy-only mode does. PodCIDRs may then be empty.
	GatewayHasNodeIP bool
	// NodeIP is the node's underlay address; nil means the first global IPv4
	// address of the uplink (or of br-phy, when a previous run moved it).
	NodeIP net.IP
	// PodCIDRs are the node's pod CIDRs (one per IP family); the gateway gets
	// the first address of each.
	PodCIDRs []*net.IPNet
	// UplinkName is the node's underlay interface (e.g. eth0). Required for
	// netdev, which moves it into br-phy.
	UplinkName string
	// MTU of the gateway and pods; 0 means the uplink's MTU minus the tunnel
	// overhead and EncryptionOverhead.
	MTU int
	// EncryptionOverhead is what encryption adds to each packet between
	// nodes (WireGuard: 80), counted in the default pod MTU.
	EncryptionOverhead int
	// BridgeName, UplinkBridgeName, GatewayName, TunnelName override the defaults.
	BridgeName, UplinkBridgeName, GatewayName, TunnelName string
}

// GatewayConfig describes the node's gateway interface.
type GatewayConfig struct {
	// Name of the interface (antrea-gw0).
	Name string
	// IPs are the first addresses of the pod CIDRs.
	IPs []net.IP
	// MAC is the stable MAC derived from the node name and pod CIDRs.
	MAC net.HardwareAddr
	// OFPort is the gateway's OpenFlow port on br-int.
	OFPort int32
	// LinkIndex is the gateway's ifindex in the node netns.
	LinkIndex int
}

// UplinkConfig describes the node's underlay attachment.
type UplinkConfig struct {
	// Name of the uplink (e.g. eth0).
	Name string
	// MAC of the uplink.
	MAC net.HardwareAddr
	// MTU of the uplink.
	MTU int
	// BridgeName is the underlay bridge (br-phy) for netdev, "" otherwise.
	BridgeName string
	// BridgeMAC is the MAC of the underlay bridge's internal port, which now
	// carries the node IP.
	BridgeMAC net.HardwareAddr
	// OFPort is the uplink's OpenFlow port on the underlay bridge.
	OFPort int32
}

// NodeConfig is what Bringup found or made; the agent's other parts use it.
type NodeConfig struct {
	// Name of the node.
	Name string
	// BridgeName is the integration bridge.
	BridgeName string
	// DatapathType of the bridges.
	DatapathType ovsconfig.OVSDatapathType
	// NodeIP is the node's underlay address with its prefix.
	NodeIP *net.IPNet
	// PodCIDRs are the node's pod CIDRs.
	PodCIDRs []*net.IPNet
	// Gateway is antrea-gw0.
	Gateway GatewayConfig
	// TunnelName, TunnelType and TunnelOFPort describe antrea-tun0; with
	// NoTunnel the type is "" and the port 0.
	TunnelName   string
	TunnelType   ovsconfig.TunnelType
	TunnelOFPort int32
	// Uplink is the underlay attachment.
	Uplink UplinkConfig
	// PodMTU is the MTU of the gateway and of pod interfaces.
	PodMTU int
	// OVSRunDir is ovs-vswitchd's run directory (for ovs-appctl).
	OVSRunDir string
}

// PinTunnelNeighbor pins a remote node's underlay MAC in ovs-vswitchd's
// tunnel neighbour table (see the package function of that name). Without
// an underlay bridge (the kernel datapath) the kernel resolves neighbours
// and there is nothing to pin.
func (nc *NodeConfig) PinTunnelNeighbor(ctx context.Context, ip net.IP, mac net.HardwareAddr) error {
	if nc.Uplink.BridgeName == "" {
		return nil
	}
	return PinTunnelNeighbor(ctx, nc.OVSRunDir, nc.Uplink.BridgeName, ip, mac)
}

// RestoreUnderlay puts the node's addresses and routes back on the underlay
// bridge's internal port after ovs-vswitchd restarted: the port is a tap
// device that went away with it, and the image's start_ovs gave them back to
// the uplink when it stopped. Without an underlay bridge (the kernel
// datapath) there is nothing to do.
func (nc *NodeConfig) RestoreUnderlay(ctx context.Context, conn *ovsconfig.Connection, ovsRunDir string) error {
	if nc.Uplink.BridgeName == "" {
		return nil
	}
	if _, err := configureLink(ctx, nc.Uplink.BridgeName, nc.Uplink.BridgeMAC, 0, nil); err != nil {
		return err
	}
	var want net.IP
	if nc.NodeIP != nil {
		want = nc.NodeIP.IP
	}
	if _, err := moveAddresses(ctx, conn, nc.Uplink.BridgeName, nc.Uplink.Name, want); err != nil {
		return err
	}
	if err := ConfigureHostSidePort(nc.Uplink.Name); err != nil {
		return err
	}
	_, err := appctl(ctx, ovsRunDir, "tnl/neigh/aging", maxNeighAgingSeconds)
	return err
}

// EnsureUnderlayAddresses gives the underlay bridge's internal port back the
// node's recorded addresses and routes when it lacks them (ovs-vswitchd
// restarted and re-created the tap device without them, or the addresses
// are on the uplink again), before anything else needs the node's network:
// the agent cannot reach the API server without them. uplink is the port of
// the bridge recorded as the uplink.
func EnsureUnderlayAddresses(ctx context.Context, conn *ovsconfig.Connection, bridgeName, uplink string) error {
	_, err := moveAddresses(ctx, conn, bridgeName, uplink, nil)
	return err
}
