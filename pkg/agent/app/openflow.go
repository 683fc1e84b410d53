package app

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/route"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// flowRoundKey is the bridge external_id holding the cookie round of the
// flows installed by the last agent run.
const flowRoundKey = "antrea.io/flow-round"

// setupOpenFlow makes the OpenFlow client of br-int, which replays every
// flow when ovs-vswitchd comes back, and the pipeline's client on it, whose
// flows carry this run's round. Its component keeps the connection.
func setupOpenFlow(ctx context.Context, d *deps) (component, error) {
	nc := d.nc
	// Flow round: this run's flows replace the previous run's in place; what
	// the previous run had and this one does not want is deleted afterwards.
	ids, err := d.bridge.GetExternalIDs(ctx)
	if err != nil {
		return nil, err
	}
	prevRound, _ := strconv.ParseUint(ids[flowRoundKey], 10, 32)
	d.bridgeIDs, d.prevRound, d.round = ids, prevRound, uint32(prevRound)+1

	var flows *agentof.Client
	rs := &restore{ovsdb: d.ovsdb, underlay: func(ctx context.Context) error { return nc.RestoreUnderlay(ctx, d.ovsdb, d.o.OVSRunDir) }}
	repinNow := make(chan struct{}, 1)
	ofc := binding.NewClient(filepath.Join(d.o.OVSRunDir, nc.BridgeName+".mgmt"), binding.ClientOptions{
		// Packet-ins: AntreaProxy rejects connections to Services without
		// endpoints through them.
		Conn: binding.Options{AsyncMessages: true},
		OnConnect: func(ctx context.Context, conn *binding.Conn, reconnect bool) error {
			if reconnect {
				klog.InfoS("OpenFlow connection re-established; replaying flows", "bridge", nc.BridgeName)
				select { // the new ovs-vswitchd has no tunnel neighbour
				case repinNow <- struct{}{}:
				default:
				}
				if err := flows.Replay(ctx, conn); err != nil {
					return err
				}
				return rs.holdIfRestarted(ctx)
			}
			return nil
		},
	})
	// Flows are written through the flow-ops metrics (pkg/agent/metrics).
	if flows, err = agentof.NewClient(agentmetrics.Bridge{Client: ofc}, d.round); err != nil {
		return nil, err
	}
	rs.flows = flows
	d.ofc, d.flows, d.restore, d.repinNow = ofc, flows, rs, repinNow

	d.api.querier.DumpFlows = func(ctx context.Context, table uint8) ([]binding.FlowStats, error) {
		return ofc.DumpFlows(ctx, table, 0, 0)
	}
	d.api.metrics.TableStats = d.tableStats
	return loop(ofc.Run), nil
}

// tableStats reads br-int's table stats (an OpenFlow multipart request).
func (d *deps) tableStats(ctx context.Context) ([]binding.TableStats, error) {
	conn, err := d.ofc.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return conn.TableStats(ctx)
}

// setupPipeline holds br-int if its flow table is empty (a new or restarted
// ovs-vswitchd: the pod flows go in before their NetworkPolicies) and
// installs the pipeline's fixed flows and the node's own.
func setupPipeline(ctx context.Context, d *deps) (component, error) {
	if err := d.restore.holdIfEmpty(ctx, d.ofc); err != nil {
		return nil, err
	}
	nc := d.nc
	if len(d.podCIDRs) == 0 {
		// networkPolicyOnly without a pod CIDR of Antrea's: the
		// gateway holds the node's address (nodeinit.GatewayHasNodeIP).
		d.gatewayIP = nc.Gateway.IPs[0]
	} else {
		d.gatewayIP = route.GatewayIP(d.podCIDRs[0])
	}
	// A dual-stack node (an IPv6 pod CIDR beside the IPv4 one): the
	// gateway holds the first address of each, and the pipeline carries
	// both families (docs/ipv6.md).
	for _, c := range d.podCIDRs[min(1, len(d.podCIDRs)):] {
		if c.IP.To4() == nil && d.gatewayIP.To4() != nil {
			d.gatewayIPv6 = route.GatewayIP(c)
		}
	}
	return nil, d.flows.Initialize(ctx, &agentof.NodeConfig{
		GatewayOFPort: uint32(nc.Gateway.OFPort),
		GatewayIP:     d.gatewayIP,
		GatewayIPv6:   d.gatewayIPv6,
		GatewayMAC:    nc.Gateway.MAC,
		TunnelOFPort:  uint32(nc.TunnelOFPort),
		PodCIDR:       firstOrNil(d.podCIDRs),
		NodeIP:        nc.NodeIP.IP,
		NodeIPv6:      ipOrNil(d.nodeIPv6()),
		PolicyOnly:    d.o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly,
	})
}

// setupPacketIns dispatches packet-ins to the feature that asked for them:
// Service rejects to AntreaProxy, policy rejects and audit logging to the
// policy controller, Traceflow's to Traceflow. Each registers its handler
// with the one dispatcher.
func setupPacketIns(_ context.Context, d *deps) (component, error) {
	d.packets = agentof.NewPacketInDispatcher(d.ofc)
	return loop(d.packets.Run), nil
}

// firstOrNil is the first of cidrs, nil if there is none.
func firstOrNil(cidrs []*net.IPNet) *net.IPNet {
	if len(cidrs) == 0 {
		return nil
	}
	return cidrs[0]
}

// localPodPrefixV6 is a dual-stack node's IPv6 pod CIDR (the one its
// gateway's IPv6 address is from), the zero Prefix on any other node.
func (d *deps) localPodPrefixV6() netip.Prefix {
	if d.gatewayIPv6 == nil {
		return netip.Prefix{}
	}
	for _, c := range d.podCIDRs {
		if c.IP.To4() == nil && c.Contains(d.gatewayIPv6) {
			return prefixOf(c)
		}
	}
	return netip.Prefix{}
}

// localPodPrefixes are the node's pod CIDRs the masquerade names: the
// first one (IPv6 on an IPv6-only node) and a dual-stack node's IPv6 one.
func (d *deps) localPodPrefixes() []netip.Prefix {
	cidrs := []netip.Prefix{d.localPodPrefix()}
	if v6 := d.localPodPrefixV6(); v6.IsValid() && v6 != cidrs[0] {
		// A dual-stack node: its pods' IPv6 traffic leaving the node is
		// masqueraded to the node's IPv6 address too.
		cidrs = append(cidrs, v6)
	}
	return cidrs
}

// ipv6Only says the node is an IPv6-only node (an IPv6-only cluster's):
// its one pod CIDR, and so its gateway's address, is IPv6. Its pipeline
// carries IPv6 alone (NodeConfig.families), its peers are tunnelled to
// their IPv6 InternalIPs (route.Controller.SetIPv6Only).
func (d *deps) ipv6Only() bool { return d.gatewayIP != nil && d.gatewayIP.To4() == nil }

// ipOrNil is a as a net.IP, nil for the zero Addr.
func ipOrNil(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return net.IP(a.AsSlice())
}

// nodeIPv6 is the first IPv6 InternalIP of a dual-stack node's Node (a
// dual-stack underlay's), the zero Addr when it has none.
func (d *deps) nodeIPv6() netip.Addr {
	if d.gatewayIPv6 == nil || d.node == nil {
		return netip.Addr{}
	}
	for _, a := range d.node.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil && ip.Is6() && !ip.Is4In6() {
			return ip
		}
	}
	return netip.Addr{}
}

// localPodPrefix is the node's first pod CIDR; without one
// (networkPolicyOnly, the primary allocating), the gateway's address alone:
// what needs the node's pods as a prefix (the node path's masquerade of pods
// reaching their own node's NodePorts) then matches none of them.
func (d *deps) localPodPrefix() netip.Prefix {
	if len(d.podCIDRs) == 0 {
		a := addrOf(d.gatewayIP)
		return netip.PrefixFrom(a, a.BitLen())
	}
	return prefixOf(d.podCIDRs[0])
}
