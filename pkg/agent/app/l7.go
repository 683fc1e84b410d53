package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/l7engine"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// The layer 7 engine's veth pair: OVS owns l7OVSPort, the engine reads and
// writes l7EnginePort (upstream's port name for the OVS end).
const (
	l7OVSPort    = "antrea-l7-tap0"
	l7EnginePort = "antrea-l7-tap1"
)

// setupL7Engine runs the layer 7 engine (pkg/agent/l7engine) when the
// L7NetworkPolicy gate is on: its veth pair, the OVS end a port of br-int,
// the steering flows to it, and the engine reading the other end. The
// policy controller, set up next, hands it the rules.
func setupL7Engine(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.L7NetworkPolicy] {
		return nil, nil
	}
	if err := ensureL7Veth(); err != nil {
		return nil, err
	}
	ports, err := d.bridge.GetPortList(ctx)
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range ports {
		found = found || p.Name == l7OVSPort
	}
	if !found {
		if _, err := d.bridge.CreatePort(ctx, l7OVSPort, nil); err != nil {
			return nil, fmt.Errorf("layer 7 engine port %s: %w", l7OVSPort, err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ofport, err := d.bridge.GetOFPort(wait, l7OVSPort)
	if err != nil {
		return nil, fmt.Errorf("layer 7 engine port %s: %w", l7OVSPort, err)
	}
	port, err := l7engine.OpenPort(l7EnginePort)
	if err != nil {
		return nil, err
	}
	engine := l7engine.New()
	d.l7 = engine
	if err := d.flows.SetL7EnginePort(ctx, uint32(ofport)); err != nil {
		port.Close()
		return nil, err
	}
	klog.InfoS("Layer 7 engine started", "port", l7OVSPort, "ofport", ofport)
	return runFunc(func(ctx context.Context) error {
		defer port.Close()
		return engine.Run(ctx, port)
	}), nil
}

// ensureL7Veth makes the veth pair if it is not there, both ends up, and
// keeps the node's kernel out of the engine's traffic: no ARP, no IPv6, no
// IPv4 forwarding of what arrives on the engine's end (per link settings of
// the node's netns).
func ensureL7Veth() error {
	if _, err := netlink.LinkByName(l7OVSPort); err != nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l7OVSPort, MTU: 65000}, PeerName: l7EnginePort}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("layer 7 engine veth %s: %w", l7OVSPort, err)
		}
	}
	for _, name := range []string{l7OVSPort, l7EnginePort} {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("layer 7 engine veth %s: %w", name, err)
		}
		if err := netlink.LinkSetARPOff(link); err != nil {
			return fmt.Errorf("arp off on %s: %w", name, err)
		}
		for p, v := range map[string]string{
			"/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6": "1",
			"/proc/sys/net/ipv4/conf/" + name + "/forwarding":   "0",
		} {
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return nil
}
