package nodeinit

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// twoNodes wires two OVS nodes' eth0 to a Linux bridge in an underlay netns
// (192.168.77.1 and .2), as the lab does.
func twoNodes(t *testing.T) (a, b *testNode) {
	t.Helper()
	underlay := ovsinstance.NewNetNS(t, "ovsdb")
	run(t, "ip", "-n", underlay, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", underlay, "link", "set", "br0", "up")
	mk := func(i int) *testNode {
		in := ovsinstance.StartForTest(t, "ovsdb")
		peer := fmt.Sprintf("node%d", i)
		run(t, "ip", "-n", in.NetNS(), "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", underlay)
		run(t, "ip", "-n", in.NetNS(), "addr", "add", fmt.Sprintf("192.168.77.%d/24", i), "dev", "eth0")
		run(t, "ip", "-n", in.NetNS(), "link", "set", "eth0", "up")
		run(t, "ip", "-n", underlay, "link", "set", peer, "master", "br0")
		run(t, "ip", "-n", underlay, "link", "set", peer, "up")
		nodeNS, err := ns.GetNS("/var/run/netns/" + in.NetNS())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nodeNS.Close() })
		return &testNode{in: in, nodeNS: nodeNS, peerNS: underlay}
	}
	return mk(1), mk(2)
}

// podTraffic sends the node's traffic for the other node's pod CIDR through
// the tunnel: the kernel routes it to antrea-gw0 with the remote gateway's MAC,
// br-int sets tun_dst and outputs to the tunnel; what arrives from the tunnel
// goes to the gateway. This is the least of what the agent's pipeline does.
func podTraffic(t *testing.T, n *testNode, local, remote *NodeConfig) {
	t.Helper()
	node := n.in.NetNS()
	remoteCIDR := remote.PodCIDRs[0].String()
	run(t, "ip", "-n", node, "route", "add", remoteCIDR, "via", remote.Gateway.IPs[0].String(), "dev", "antrea-gw0", "onlink")
	run(t, "ip", "-n", node, "neigh", "replace", remote.Gateway.IPs[0].String(), "lladdr", remote.Gateway.MAC.String(), "dev", "antrea-gw0")
	for _, flow := range []string{
		fmt.Sprintf("in_port=%d,ip,nw_dst=%s,actions=set_field:%s->tun_dst,output:%d",
			local.Gateway.OFPort, remoteCIDR, remote.NodeIP.IP, local.TunnelOFPort),
		fmt.Sprintf("in_port=%d,actions=output:%d", local.TunnelOFPort, local.Gateway.OFPort),
	} {
		if _, err := n.in.Ofctl("add-flow", "br-int", flow); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTunnelsCarryTrafficBetweenTwoNetdevNodesThroughTheUnderlayBridge(t *testing.T) {
	ovsinstance.RequireRoot(t)
	for _, encap := range []ovsconfig.TunnelType{ovsconfig.GeneveTunnel, ovsconfig.VXLANTunnel} {
		t.Run(string(encap), func(t *testing.T) {
			a, b := twoNodes(t)
			cfgA, cfgB := a.config(encap), b.config(encap)
			cfgA.NodeName, cfgB.NodeName = "node-a", "node-b"
			_, cidrB, _ := net.ParseCIDR("10.10.2.0/24")
			cfgB.PodCIDRs = []*net.IPNet{cidrB}
			ncA, ncB := a.bringup(t, cfgA), b.bringup(t, cfgB)
			podTraffic(t, a, ncA, ncB)
			podTraffic(t, b, ncB, ncA)

			// Pin each other's underlay MAC so not even the first packet waits on ARP.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := ncA.PinTunnelNeighbor(ctx, ncB.NodeIP.IP, ncB.Uplink.BridgeMAC); err != nil {
				t.Fatal(err)
			}
			if err := ncB.PinTunnelNeighbor(ctx, ncA.NodeIP.IP, ncA.Uplink.BridgeMAC); err != nil {
				t.Fatal(err)
			}

			if err := a.ping(t, a.in.NetNS(), "10.10.2.1"); err != nil {
				out, _ := a.in.Appctl("dpctl/dump-flows")
				t.Fatalf("node-b's gateway unreachable from node-a over %s: %v\ndatapath flows:\n%s", encap, err, out)
			}
			// The traffic really came out of node-b's tunnel port (flow
			// counters are live; interface statistics lag by seconds).
			flows, err := b.in.Ofctl("dump-flows", "br-int", fmt.Sprintf("in_port=%d", ncB.TunnelOFPort))
			if err != nil || !strings.Contains(flows, "actions=output") || strings.Contains(flows, "n_packets=0,") {
				t.Errorf("node-b's flow from the tunnel matched nothing (%v):\n%s", err, flows)
			}
		})
	}
}
