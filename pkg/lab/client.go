package lab

import (
	"context"
	"fmt"
	"net/netip"
)

// The lab's client host: netns ClientNetNS, ClientIP on a network of its own
// (clientPrefix, outside the underlay's 172.30.0.0/16) behind the router,
// which holds clientGatewayIP there and forwards (in its netns only). Every
// node and the control plane route clientPrefix via the router. It is a
// client outside the cluster that is not on the nodes' network: a
// LoadBalancer's externalTrafficPolicy Local must show its address to the
// endpoint, which upstream's e2e specs tell from the nodes' (they take any
// address of the nodes' /16 for a masquerade). make conformance-lb runs
// upstream's e2e.test there (hack/e2e-upstream.sh E2E_NETNS).
const ClientNetNS = NetNSPrefix + "client"

var clientPrefix = netip.MustParsePrefix("192.168.77.0/24")

// clientGatewayIP is the router's address on the client's network.
func clientGatewayIP() netip.Addr { return clientPrefix.Addr().Next() }

// ClientIP is the client host's address.
func ClientIP() netip.Addr { return clientGatewayIP().Next() }

// addClient makes the client host: its netns, a veth to the router's netns
// (eth0 there, client0 on the router), its default route via the router,
// the router's forwarding, and the control plane's route to it.
func (t *topology) addClient(ctx context.Context) error {
	if err := t.addNetNS(ctx, ClientNetNS); err != nil {
		return err
	}
	v := Veth{Name: "client0", NetNS: RouterNetNS, Peer: "eth0", PeerNetNS: ClientNetNS}
	if err := t.store.update(func(st *State) { st.Veths = append(st.Veths, v) }); err != nil {
		return err
	}
	bits := clientPrefix.Bits()
	cmds := [][]string{
		{"ip", "-n", RouterNetNS, "link", "add", "client0", "type", "veth", "peer", "name", "eth0", "netns", ClientNetNS},
		{"ip", "-n", RouterNetNS, "addr", "add", fmt.Sprintf("%s/%d", clientGatewayIP(), bits), "dev", "client0"},
		{"ip", "-n", RouterNetNS, "link", "set", "client0", "up"},
		{"ip", "-n", ClientNetNS, "addr", "add", fmt.Sprintf("%s/%d", ClientIP(), bits), "dev", "eth0"},
		{"ip", "-n", ClientNetNS, "link", "set", "eth0", "up"},
		{"ip", "-n", ClientNetNS, "route", "add", "default", "via", clientGatewayIP().String()},
		// Checksums computed by the sender, as on the underlay (attach).
		{"ip", "netns", "exec", ClientNetNS, "ethtool", "-K", "eth0", "tx", "off"},
		{"ip", "netns", "exec", RouterNetNS, "ethtool", "-K", "client0", "tx", "off"},
		routerForwarding(),
		clientRoute(ControlPlaneNetNS, 1),
	}
	for _, c := range cmds {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("make the client host: %w", err)
		}
	}
	return nil
}

// clientRoute is the command that routes a host of subnet s to the client
// host's network via the router.
func clientRoute(netns string, s int) []string {
	return []string{"ip", "-n", netns, "route", "replace", clientPrefix.String(), "via", routerIPIn(s).String(), "dev", "eth0"}
}
