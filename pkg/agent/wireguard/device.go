// Package wireguard encrypts the pod traffic between nodes
// (trafficEncryptionMode wireGuard, docs/design/wireguard.md). The datapath
// then runs as in noEncap: OVS sends a remote pod's packets out of br-int
// through antrea-gw0 into the node's kernel, whose route for the peer's pod
// CIDR leads into the WireGuard interface antrea-wg0; WireGuard encrypts them
// to the peer node's InternalIP, UDP port 51820 (wireGuard.port).
//
// It has three parts:
//   - Device (this file): antrea-wg0, whatever implements it, chosen at start
//     by Open: the kernel's wireguard module through netlink and wgctrl where
//     the kernel has it, else wireguard-go inside the agent behind a TUN
//     device (userspace.go; the kernel of this project's machines has no
//     WireGuard);
//   - the node's key pair (keys.go): the private key in a 0600 file under the
//     agent's state directory, the public key published in the Node
//     annotation node.antrea.io/wireguard-public-key;
//   - Routes (routes.go): the route.HostRoutes of this mode, which the node
//     route controller drives from the Node informer: per peer node, a
//     WireGuard peer (its public key, endpoint InternalIP:port, allowed IPs
//     its pod CIDR) and a route of its pod CIDR into antrea-wg0.
package wireguard

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/util/kernelconfig"
)

const (
	// DeviceName is the WireGuard interface (upstream's name).
	DeviceName = "antrea-wg0"
	// DefaultPort is wireGuard.port's default: WireGuard's usual port.
	DefaultPort = 51820
	// Overhead is what WireGuard adds to a packet, counted in the pod MTU:
	// outer IPv6 header 40 + UDP 8 + WireGuard data header 16 + tag 16
	// (upstream counts 80 so that an IPv6 underlay fits too).
	Overhead = 80
)

// Backend names an implementation of the WireGuard interface.
type Backend string

const (
	// BackendKernel is the kernel's wireguard module (CONFIG_WIREGUARD).
	BackendKernel Backend = "kernel"
	// BackendUserspace is wireguard-go in the agent behind a TUN device.
	BackendUserspace Backend = "userspace"
)

// Device is the node's WireGuard interface, whatever implements it.
type Device interface {
	// Name is the interface's name (antrea-wg0).
	Name() string
	Backend() Backend
	// Configure applies cfg (wgctrl's semantics: peers are added, updated
	// or removed one by one unless ReplacePeers).
	Configure(cfg wgtypes.Config) error
	// Peers are the configured peers with their counters.
	Peers() ([]wgtypes.Peer, error)
	// PublicKey is the public key of the configured private key.
	PublicKey() (wgtypes.Key, error)
	// Close removes the interface (userspace: it goes with the agent).
	Close() error
}

// Choice is the backend Open chose and why.
type Choice struct {
	Backend Backend
	// Reason says what decided it (the kernel's configuration, or the
	// error creating a kernel WireGuard link).
	Reason string
}

// Open creates (or takes over) the WireGuard interface name with mtu: with
// the kernel's module when the kernel has one (a link of type wireguard can
// be created), else with wireguard-go behind a TUN device. kernel is where
// the kernel's configuration is read.
func Open(name string, mtu int, kernel kernelconfig.Paths) (Device, Choice, error) {
	a, err := kernel.Has("CONFIG_WIREGUARD", "wireguard")
	switch {
	case err == nil && !a.Has:
		// No module to try: do not make the kernel look for one.
		ch := Choice{Backend: BackendUserspace, Reason: "the kernel has no WireGuard (" + a.Evidence + ")"}
		d, err := openUserspace(name, mtu)
		return d, ch, err
	case err != nil:
		a.Evidence = err.Error()
	}
	d, kerr := openKernel(name, mtu)
	if kerr == nil {
		return d, Choice{Backend: BackendKernel, Reason: "the kernel has WireGuard (" + a.Evidence + ")"}, nil
	}
	ch := Choice{Backend: BackendUserspace, Reason: fmt.Sprintf("a kernel WireGuard link cannot be created: %v", kerr)}
	klog.InfoS("No kernel WireGuard; running wireguard-go in the agent", "reason", ch.Reason)
	du, err := openUserspace(name, mtu)
	return du, ch, err
}

// kernelDevice is antrea-wg0 as a kernel wireguard link, configured through
// wgctrl's generic netlink client. It cannot be tried on this project's
// machines (no CONFIG_WIREGUARD): it is kept to the few calls wgctrl and
// netlink document.
type kernelDevice struct {
	name   string
	client *wgctrl.Client
}

func openKernel(name string, mtu int) (Device, error) {
	if l, err := netlink.LinkByName(name); err == nil && l.Type() != "wireguard" {
		// A TUN left by a userspace run (it goes with its process, but
		// be sure): make room for the kernel link.
		if err := netlink.LinkDel(l); err != nil {
			return nil, fmt.Errorf("delete %s (%s): %w", name, l.Type(), err)
		}
	}
	link := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
	if err := netlink.LinkAdd(link); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("ip link add %s type wireguard: %w", name, err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return nil, fmt.Errorf("link %s: set MTU %d: %w", name, mtu, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("link %s up: %w", name, err)
	}
	c, err := wgctrl.New()
	if err != nil {
		return nil, fmt.Errorf("wgctrl: %w", err)
	}
	return &kernelDevice{name: name, client: c}, nil
}

func (k *kernelDevice) Name() string     { return k.name }
func (k *kernelDevice) Backend() Backend { return BackendKernel }
func (k *kernelDevice) Configure(cfg wgtypes.Config) error {
	return k.client.ConfigureDevice(k.name, cfg)
}

func (k *kernelDevice) Peers() ([]wgtypes.Peer, error) {
	d, err := k.client.Device(k.name)
	if err != nil {
		return nil, err
	}
	return d.Peers, nil
}

func (k *kernelDevice) PublicKey() (wgtypes.Key, error) {
	d, err := k.client.Device(k.name)
	if err != nil {
		return wgtypes.Key{}, err
	}
	return d.PublicKey, nil
}

// Close keeps the kernel link: its peers keep encrypting while the agent
// restarts (the next run takes it over and reconciles its peers).
func (k *kernelDevice) Close() error { return k.client.Close() }

// Endpoint is a peer node's WireGuard endpoint: its InternalIP and port.
func Endpoint(nodeIP net.IP, port int) *net.UDPAddr {
	return &net.UDPAddr{IP: nodeIP, Port: port}
}
