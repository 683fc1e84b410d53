package nodeinit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/util/garp"
)

// tunnelOverhead is the bytes an encapsulated IPv4 packet adds: outer IP 20
// and the inner Ethernet header 14, plus UDP 8 and the Geneve or VXLAN header
// 8, or GRE's 4-byte header without a key (upstream's config.GeneveOverhead
// and VXLANOverhead are 50, GREOverhead 38).
//
// Over an IPv6 underlay (an IPv6-only node) the outer IP header is 40
// bytes, 20 more (upstream's config.IPv6ExtraOverhead).
func tunnelOverhead(t ovsconfig.TunnelType, ipv6Underlay bool) int {
	outer := 20
	if ipv6Underlay {
		outer = 40
	}
	if t == ovsconfig.GRETunnel {
		return outer + 14 + 4
	}
	return outer + 14 + 8 + 8
}

// defaultMTU is used when there is no uplink to read one from.
const defaultMTU = 1500

func (c *Config) setDefaults() error {
	if c.NodeName == "" {
		return errors.New("node bring-up: NodeName is required")
	}
	if c.DatapathType == "" {
		c.DatapathType = ovsconfig.OVSDatapathSystem
	}
	if c.DatapathType != ovsconfig.OVSDatapathSystem && c.DatapathType != ovsconfig.OVSDatapathNetdev {
		return fmt.Errorf("node %s: bad datapath type %q", c.NodeName, c.DatapathType)
	}
	if c.TunnelType == "" {
		c.TunnelType = ovsconfig.GeneveTunnel
	}
	if !c.TunnelType.Valid() {
		return fmt.Errorf("node %s: bad tunnel type %q (want %s)", c.NodeName, c.TunnelType, ovsconfig.TunnelTypeNames())
	}
	if len(c.PodCIDRs) == 0 && !c.GatewayHasNodeIP {
		return fmt.Errorf("node %s: no pod CIDR", c.NodeName)
	}
	if c.DatapathType == ovsconfig.OVSDatapathNetdev && !c.NoUnderlayBridge && c.UplinkName == "" {
		return fmt.Errorf("node %s: the netdev datapath needs the uplink name (its IP moves to %s)", c.NodeName, DefaultUplinkBridgeName)
	}
	if c.Conn == nil && c.OVSDBEndpoint == "" {
		return fmt.Errorf("node %s: neither an OVSDB connection nor an endpoint", c.NodeName)
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&c.BridgeName, DefaultBridgeName)
	def(&c.UplinkBridgeName, DefaultUplinkBridgeName)
	def(&c.GatewayName, DefaultGatewayName)
	def(&c.TunnelName, DefaultTunnelName)
	return nil
}

// StableMAC derives a locally administered unicast MAC from seed, so an
// interface keeps its MAC across agent restarts and re-creations (neighbours'
// ARP caches and flows that match it stay valid).
func StableMAC(seed string) net.HardwareAddr {
	h := sha256.Sum256([]byte(seed))
	mac := net.HardwareAddr(h[:6])
	mac[0] = (mac[0] &^ 0x01) | 0x02 // unicast, locally administered
	return mac
}

// gatewayMAC is the gateway's MAC: a function of the node and its pod CIDRs.
func gatewayMAC(cfg *Config) net.HardwareAddr {
	seed := cfg.NodeName + "/gateway"
	for _, c := range cfg.PodCIDRs {
		seed += "/" + c.String()
	}
	return StableMAC(seed)
}

// firstIP returns the first host address of cidr (network address + 1).
func firstIP(cidr *net.IPNet) net.IP {
	ip := cidr.IP.Mask(cidr.Mask)
	out := make(net.IP, len(ip))
	copy(out, ip)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			break
		}
	}
	return out
}

// Bringup makes the node's OVS bridges, ports and links match cfg and returns
// what the agent needs to know about them. It is safe to run again: what is
// already right is left untouched.
func Bringup(ctx context.Context, cfg Config) (*NodeConfig, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	conn := cfg.Conn
	if conn == nil {
		var err error
		if conn, err = ovsconfig.Connect(ctx, cfg.OVSDBEndpoint); err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
		defer conn.Close()
	}
	nc := &NodeConfig{
		Name:         cfg.NodeName,
		BridgeName:   cfg.BridgeName,
		DatapathType: cfg.DatapathType,
		PodCIDRs:     cfg.PodCIDRs,
		TunnelName:   cfg.TunnelName,
		TunnelType:   cfg.TunnelType,
		OVSRunDir:    cfg.OVSRunDir,
	}

	uplinkMTU := defaultMTU
	if cfg.UplinkName != "" {
		up, err := waitLink(ctx, cfg.UplinkName)
		if err != nil {
			return nil, fmt.Errorf("node %s: uplink: %w", cfg.NodeName, err)
		}
		uplinkMTU = up.Attrs().MTU
		nc.Uplink = UplinkConfig{Name: cfg.UplinkName, MAC: up.Attrs().HardwareAddr, MTU: uplinkMTU}
	}
	if cfg.DatapathType == ovsconfig.OVSDatapathNetdev && !cfg.NoUnderlayBridge {
		if err := bringUpUnderlay(ctx, conn, &cfg, nc); err != nil {
			return nil, fmt.Errorf("node %s: underlay bridge %s: %w", cfg.NodeName, cfg.UplinkBridgeName, err)
		}
	} else {
		nodeIP, err := findNodeIP(cfg.NodeIP, cfg.UplinkName)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
		nc.NodeIP = nodeIP
	}
	nc.PodMTU = cfg.MTU
	if nc.PodMTU == 0 {
		nc.PodMTU = uplinkMTU
		if !cfg.NoTunnel {
			nc.PodMTU -= tunnelOverhead(cfg.TunnelType, nc.NodeIP != nil && nc.NodeIP.IP.To4() == nil)
		}
		nc.PodMTU -= cfg.EncryptionOverhead
	}

	br := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{
		Name: cfg.BridgeName, DatapathType: cfg.DatapathType,
		// Antrea's pipeline is the only controller; in-band flows would only get in the way.
		OtherConfig: map[string]string{"disable-in-band": "true"},
	})
	if err := br.Create(ctx); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
	}
	if cfg.NoTunnel {
		nc.TunnelType = ""
		if err := removeTunnel(ctx, br, cfg.TunnelName); err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
	} else {
		ofPort, err := ensureTunnel(ctx, br, &cfg)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
		nc.TunnelOFPort = ofPort
	}
	if err := ensureGateway(ctx, br, &cfg, nc); err != nil {
		return nil, fmt.Errorf("node %s: gateway %s: %w", cfg.NodeName, cfg.GatewayName, err)
	}
	klog.InfoS("Node bring-up done", "node", cfg.NodeName, "datapath", cfg.DatapathType, "bridge", cfg.BridgeName,
		"gatewayOFPort", nc.Gateway.OFPort, "tunnelOFPort", nc.TunnelOFPort, "tunnelType", cfg.TunnelType,
		"nodeIP", nc.NodeIP, "podMTU", nc.PodMTU)
	return nc, nil
}

// ensureTunnel creates antrea-tun0 or, when the encapsulation setting or
// checksum option changed, replaces it; an up-to-date port is left alone.
func ensureTunnel(ctx context.Context, br *ovsconfig.OVSBridge, cfg *Config) (int32, error) {
	tc := ovsconfig.TunnelConfig{
		Name: cfg.TunnelName, Type: cfg.TunnelType, OFPortRequest: TunnelOFPort, CSum: cfg.TunnelCSum,
		ExternalIDs: interfacestore.BuildOVSPortExternalIDs(
			interfacestore.NewTunnelInterface(cfg.TunnelName, cfg.TunnelType, nil, cfg.TunnelCSum)),
	}
	existing, err := br.GetPortData(ctx, cfg.TunnelName)
	switch {
	case errors.Is(err, ovsconfig.ErrNotFound):
	case err != nil:
		return 0, err
	case existing.IFType == string(cfg.TunnelType) && maps.Equal(existing.Options, ovsconfig.TunnelOptions(tc)):
		return br.GetOFPort(ctx, cfg.TunnelName)
	default:
		klog.InfoS("Replacing tunnel port", "port", cfg.TunnelName, "oldType", existing.IFType, "newType", cfg.TunnelType)
		if err := br.DeletePort(ctx, existing.UUID); err != nil {
			return 0, err
		}
	}
	if _, err := br.CreateTunnelPort(ctx, tc); err != nil {
		return 0, err
	}
	return br.GetOFPort(ctx, cfg.TunnelName)
}

// removeTunnel deletes the tunnel port an earlier run in an encapsulating
// mode left; none is no error.
func removeTunnel(ctx context.Context, br *ovsconfig.OVSBridge, name string) error {
	existing, err := br.GetPortData(ctx, name)
	switch {
	case errors.Is(err, ovsconfig.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	klog.InfoS("Removing the tunnel port: trafficEncapMode is noEncap", "port", name, "type", existing.IFType)
	return br.DeletePort(ctx, existing.UUID)
}

// ensureGateway creates antrea-gw0 as an internal port with a stable MAC and
// gives its link the pod CIDRs' first addresses, the pod MTU and state up.
func ensureGateway(ctx context.Context, br *ovsconfig.OVSBridge, cfg *Config, nc *NodeConfig) error {
	mac := gatewayMAC(cfg)
	var ips []net.IP
	var addrs []*net.IPNet
	for _, c := range cfg.PodCIDRs {
		ip := firstIP(c)
		ips = append(ips, ip)
		addrs = append(addrs, &net.IPNet{IP: ip, Mask: c.Mask})
	}
	if cfg.GatewayHasNodeIP {
		if nc.NodeIP == nil {
			return fmt.Errorf("the gateway takes the node's address, and the node has none on %s", cfg.UplinkName)
		}
		ip := nc.NodeIP.IP
		bits := 8 * len(ip)
		if ip4 := ip.To4(); ip4 != nil {
			ip, bits = ip4, 32
		}
		ips, addrs = []net.IP{ip}, []*net.IPNet{{IP: ip, Mask: net.CIDRMask(bits, bits)}}
	}
	ids := interfacestore.BuildOVSPortExternalIDs(interfacestore.NewGatewayInterface(cfg.GatewayName, mac, ips))
	existing, err := br.GetPortData(ctx, cfg.GatewayName)
	switch {
	case errors.Is(err, ovsconfig.ErrNotFound):
		if _, err := br.CreatePortWithConfig(ctx, ovsconfig.PortConfig{
			Name: cfg.GatewayName, Type: ovsconfig.InterfaceTypeInternal, OFPortRequest: GatewayOFPort,
			MAC: mac.String(), MTU: nc.PodMTU, ExternalIDs: ids,
		}); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if existing.IFType != ovsconfig.InterfaceTypeInternal {
			return fmt.Errorf("port %s exists with type %q, want internal", cfg.GatewayName, existing.IFType)
		}
		if !maps.Equal(existing.ExternalIDs, ids) {
			if err := br.SetPortExternalIDs(ctx, cfg.GatewayName, ids); err != nil {
				return err
			}
		}
		if existing.MAC != mac.String() {
			if err := br.SetInterfaceMAC(ctx, cfg.GatewayName, mac.String()); err != nil {
				return err
			}
		}
	}
	ofPort, err := br.GetOFPort(ctx, cfg.GatewayName)
	if err != nil {
		return err
	}
	link, err := configureLink(ctx, cfg.GatewayName, mac, nc.PodMTU, addrs)
	if err != nil {
		return err
	}
	nc.Gateway = GatewayConfig{Name: cfg.GatewayName, IPs: ips, MAC: mac, OFPort: ofPort, LinkIndex: link.Attrs().Index}
	return nil
}

// bringUpUnderlay makes br-phy (netdev only): a standalone bridge (its NORMAL
// flow pops received tunnel packets to the kernel and forwards the rest)
// holding the uplink, with the node's addresses and routes on its internal
// port.
func bringUpUnderlay(ctx context.Context, conn *ovsconfig.Connection, cfg *Config, nc *NodeConfig) error {
	brMAC := StableMAC(cfg.NodeName + "/" + cfg.UplinkBridgeName)
	phy := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{
		Name: cfg.UplinkBridgeName, DatapathType: cfg.DatapathType, FailModeStandalone: true,
		// Not the uplink's MAC (OVS's default choice): with the same MAC the
		// kernel would take a frame both from the uplink and from br-phy.
		OtherConfig: map[string]string{"hwaddr": brMAC.String(), "disable-in-band": "true"},
	})
	if err := phy.Create(ctx); err != nil {
		return err
	}
	uplinkIDs := interfacestore.BuildOVSPortExternalIDs(
		interfacestore.NewUplinkInterface(cfg.UplinkName, nc.Uplink.MAC, nil))
	existing, err := phy.GetPortData(ctx, cfg.UplinkName)
	switch {
	case errors.Is(err, ovsconfig.ErrNotFound):
		if _, err := phy.CreatePort(ctx, cfg.UplinkName, uplinkIDs); err != nil {
			return err
		}
	case err != nil:
		return err
	case !maps.Equal(existing.ExternalIDs, uplinkIDs):
		if err := phy.SetPortExternalIDs(ctx, cfg.UplinkName, uplinkIDs); err != nil {
			return err
		}
	}
	ofPort, err := phy.GetOFPort(ctx, cfg.UplinkName)
	if err != nil {
		return err
	}
	nc.Uplink.BridgeName = cfg.UplinkBridgeName
	nc.Uplink.BridgeMAC = brMAC
	nc.Uplink.OFPort = ofPort

	if _, err := configureLink(ctx, cfg.UplinkBridgeName, brMAC, 0, nil); err != nil {
		return err
	}
	nodeIP, err := moveAddresses(ctx, conn, cfg.UplinkBridgeName, cfg.UplinkName, cfg.NodeIP)
	if err != nil {
		return err
	}
	nc.NodeIP = nodeIP
	// The uplink is now only a port of br-phy: the kernel must neither answer
	// ARP on it nor speak IPv6 from it with its own MAC.
	if err := ConfigureHostSidePort(cfg.UplinkName); err != nil {
		return err
	}
	// The node's address now answers with br-phy's MAC: tell the peers.
	if nodeIP != nil {
		if err := garp.Announce(cfg.UplinkBridgeName, nodeIP.IP, 3, 100*time.Millisecond); err != nil {
			klog.ErrorS(err, "Cannot announce the node address's new MAC; peers learn it when their entry ages", "address", nodeIP.IP)
		}
	}
	// Neighbour entries of userspace tunnels age out while traffic flows and
	// the cached datapath flow then drops (ENVIRONMENT.md); keep learned ones
	// for the longest time OVS allows, and PinTunnelNeighbor refreshes them.
	if _, err := appctl(ctx, cfg.OVSRunDir, "tnl/neigh/aging", maxNeighAgingSeconds); err != nil {
		return err
	}
	return nil
}
