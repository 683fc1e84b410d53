package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"
)

const netnsDir = "/var/run/netns"

func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

// run runs a command (ip, sysctl, ...) and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// topology creates the lab's namespaces and links, recording each in the
// state before it is made so that a crash in between leaves nothing unknown.
type topology struct {
	store *stateStore
	// v6 gives every host of the underlay its IPv6 address too (a
	// dual-stack lab; underlay6.go).
	v6 bool
}

// addNetNS creates a network namespace with lo up.
func (t *topology) addNetNS(ctx context.Context, name string) error {
	if err := t.store.update(func(st *State) { st.NetNS = append(st.NetNS, name) }); err != nil {
		return err
	}
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return fmt.Errorf("create netns %s: %w", name, err)
	}
	if err := run(ctx, "ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		return fmt.Errorf("set lo up in netns %s: %w", name, err)
	}
	return nil
}

// attach joins netns to the underlay bridge of subnet 1 with a veth whose
// end in netns is eth0 holding addr (CIDR form), and whose bridge end is
// bridgePort.
func (t *topology) attach(ctx context.Context, netns, bridgePort, addr string) error {
	return t.attachTo(ctx, underlayBridge, netns, bridgePort, "eth0", addr)
}

// attachTo joins netns to the underlay bridge bridge with a veth whose end
// in netns is peer holding addr (CIDR form), and whose bridge end is
// bridgePort.
func (t *topology) attachTo(ctx context.Context, bridge, netns, bridgePort, peer, addr string) error {
	v := Veth{Name: bridgePort, NetNS: UnderlayNetNS, Peer: peer, PeerNetNS: netns}
	if err := t.store.update(func(st *State) { st.Veths = append(st.Veths, v) }); err != nil {
		return err
	}
	steps := attachCommands(bridge, netns, bridgePort, peer, addr)
	if t.v6 {
		p, err := netip.ParsePrefix(addr)
		if err != nil {
			return fmt.Errorf("attach netns %s to the underlay: %w", netns, err)
		}
		steps = append(steps, ipv6AddrCommand(netns, peer, p.Addr()))
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("attach netns %s to the underlay: %w", netns, err)
		}
	}
	return nil
}

// attachCommands are the commands of attachTo (without the record), also
// run again when a node's netns is made anew (RebootNode).
func attachCommands(bridge, netns, bridgePort, peer, addr string) [][]string {
	return [][]string{
		{"ip", "-n", UnderlayNetNS, "link", "add", bridgePort, "type", "veth", "peer", "name", peer, "netns", netns},
		{"ip", "-n", UnderlayNetNS, "link", "set", bridgePort, "master", bridge, "up"},
		{"ip", "-n", netns, "addr", "add", addr, "dev", peer},
		{"ip", "-n", netns, "link", "set", peer, "up"},
		// A veth hands its peer packets with checksums left to offload; the
		// userspace datapath of a node that holds its uplink in br-phy passes
		// them on unchecked and the receiving kernel drops them (ICMP works,
		// TCP does not). Senders on the underlay therefore compute checksums.
		{"ip", "netns", "exec", netns, "ethtool", "-K", peer, "tx", "off"},
	}
}

// build creates the underlay with a bridge per subnet, the control-plane
// netns, the outside host's netns, the router's (on every subnet) and one
// netns per node, each joined to its subnet's bridge (subnets.go).
func (t *topology) build(ctx context.Context, opts Options) ([]NodeInfo, error) {
	subnets := opts.subnets()
	t.v6 = opts.ipv6Underlay()
	if err := t.addNetNS(ctx, UnderlayNetNS); err != nil {
		return nil, err
	}
	for s := 1; s <= subnets; s++ {
		for _, c := range [][]string{
			{"ip", "-n", UnderlayNetNS, "link", "add", subnetBridge(s), "type", "bridge"},
			{"ip", "-n", UnderlayNetNS, "link", "set", subnetBridge(s), "up"},
		} {
			if err := run(ctx, c[0], c[1:]...); err != nil {
				return nil, fmt.Errorf("create underlay bridge: %w", err)
			}
		}
	}
	if err := t.addNetNS(ctx, ControlPlaneNetNS); err != nil {
		return nil, err
	}
	bits := underlayPrefix.Bits()
	if err := t.attach(ctx, ControlPlaneNetNS, "v-cp", fmt.Sprintf("%s/%d", controlPlaneIP(), bits)); err != nil {
		return nil, err
	}
	if err := t.addNetNS(ctx, OutsideNetNS); err != nil {
		return nil, err
	}
	if err := t.attach(ctx, OutsideNetNS, "v-outside", fmt.Sprintf("%s/%d", OutsideIP(), bits)); err != nil {
		return nil, err
	}
	if err := t.addNetNS(ctx, RouterNetNS); err != nil {
		return nil, err
	}
	if err := t.attach(ctx, RouterNetNS, "v-router", fmt.Sprintf("%s/%d", RouterIP(), bits)); err != nil {
		return nil, err
	}
	if err := t.addClient(ctx); err != nil {
		return nil, err
	}
	if err := t.joinSubnets(ctx, subnets); err != nil {
		return nil, err
	}
	var nodes []NodeInfo
	for i := 1; i <= opts.Nodes; i++ {
		s := nodeSubnet(i, opts.Nodes, subnets)
		n := NodeInfo{Name: NodeName(i), NetNS: nodeNetNS(i), IP: nodeIPIn(i, s).String(), Subnet: s}
		if err := t.addNetNS(ctx, n.NetNS); err != nil {
			return nil, err
		}
		if err := t.attachTo(ctx, subnetBridge(s), n.NetNS, "v-"+n.Name, "eth0", fmt.Sprintf("%s/%d", n.IP, bits)); err != nil {
			return nil, err
		}
		if t.v6 {
			n.IPv6 = underlayV6(nodeIPIn(i, s)).String()
			n.IPv6Only = opts.ipv6Only()
		}
		for _, c := range append(routeCommands(n.NetNS, s, subnets), v6RouteCommands(t.v6, n.NetNS, s, subnets)...) {
			if err := run(ctx, c[0], c[1:]...); err != nil {
				return nil, fmt.Errorf("route node %s to the other subnets: %w", n.Name, err)
			}
		}
		// A node routes between its pods and the underlay.
		for _, fwd := range nodeForwardingCommands(n.NetNS, t.v6) {
			if err := run(ctx, fwd[0], fwd[1:]...); err != nil {
				return nil, fmt.Errorf("enable forwarding in netns %s: %w", n.NetNS, err)
			}
		}
		nodes = append(nodes, n)
		if err := t.store.update(func(st *State) { st.Nodes = append(st.Nodes, n) }); err != nil {
			return nil, err
		}
	}
	klog.InfoS("Lab topology created", "underlay", underlayPrefix.String(), "subnets", subnets, "controlPlane", controlPlaneIP().String(), "outside", OutsideIP().String(), "nodes", len(nodes))
	return nodes, nil
}

// joinSubnets gives the router a leg in every subnet but the first
// (ethS-1 at .1 of subnet S), turns on forwarding in the router's netns
// (only there: never the host's), and routes the outside host (subnet 1)
// to the other subnets via the router. The control plane gets a leg in
// every subnet too (ethS-1 at .2), as a cluster's control plane reaches
// every node's network: kube-apiserver dials kubelets and, by the routes
// `up` adds via each node's IP, pods, which the router (no pod CIDR in it)
// would not carry. Nothing with one subnet.
func (t *topology) joinSubnets(ctx context.Context, subnets int) error {
	if subnets <= 1 {
		return nil
	}
	for s := 2; s <= subnets; s++ {
		p := subnetPrefix(s)
		if err := t.attachTo(ctx, subnetBridge(s), RouterNetNS, fmt.Sprintf("v-router-%d", s), RouterInterface(s),
			fmt.Sprintf("%s/%d", routerIPIn(s), p.Bits())); err != nil {
			return err
		}
		if err := t.attachTo(ctx, subnetBridge(s), ControlPlaneNetNS, fmt.Sprintf("v-cp-%d", s), RouterInterface(s),
			fmt.Sprintf("%s/%d", subnetAddr(s, 2), p.Bits())); err != nil {
			return err
		}
	}
	for _, c := range routerCommands(t.v6, subnets) {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("join the underlay subnets: %w", err)
		}
	}
	return nil
}

// routerCommands are the commands that make the lab's router forward
// between the subnets (IPv6 too with v6: a dual-stack or IPv6-only lab,
// whose hybrid and encap peers across subnets are reached over the IPv6
// underlay), in its own netns only, and route the outside host (subnet 1)
// to the other subnets via the router.
func routerCommands(v6 bool, subnets int) [][]string {
	cmds := [][]string{routerForwarding()}
	cmds = append(cmds, routeCommands(OutsideNetNS, 1, subnets)...)
	if v6 {
		cmds = append(cmds, ipv6ForwardingCommand(RouterNetNS))
		cmds = append(cmds, v6RouteCommands(true, OutsideNetNS, 1, subnets)...)
	}
	return cmds
}

// routerForwarding is the command that makes the lab's router forward
// between the subnets, in its own netns.
func routerForwarding() []string {
	return []string{"ip", "netns", "exec", RouterNetNS, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"}
}

// deleteNetNS removes a network namespace (and with it every link inside).
func deleteNetNS(ctx context.Context, name string) error {
	if _, err := os.Stat(netnsPath(name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := run(ctx, "ip", "netns", "del", name); err != nil {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// labNetNS lists the existing namespaces with the lab's prefix: the ones the
// supervisor made and the pods' ones the node simulators made.
func labNetNS() []string {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), NetNSPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// nodeForwarding is the command that makes a node route between its pods and
// the underlay.
func nodeForwarding(netns string) []string {
	return []string{"ip", "netns", "exec", netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"}
}

// nodeForwardingCommands are the commands that make a node forward IPv4
// and, with v6 (a dual-stack lab), IPv6, in its own netns.
func nodeForwardingCommands(netns string, v6 bool) [][]string {
	cmds := [][]string{nodeForwarding(netns)}
	if v6 {
		cmds = append(cmds, ipv6ForwardingCommand(netns))
	}
	return cmds
}
