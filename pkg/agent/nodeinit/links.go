package nodeinit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"antrea.io/antrea/pkg/agent/types"
)

// maxNeighAgingSeconds is NEIGH_ENTRY_MAX_AGING_TIME_S of OVS's
// lib/tnl-neigh-cache.c: the longest tunnel neighbour lifetime it accepts.
const maxNeighAgingSeconds = "3600"

// linkWaitTimeout bounds the wait for a link ovs-vswitchd creates
// asynchronously (an internal port's tap device).
const linkWaitTimeout = 10 * time.Second

// waitLink waits (bounded) until the link named name exists in the current
// network namespace.
func waitLink(ctx context.Context, name string) (netlink.Link, error) {
	ctx, cancel := context.WithTimeout(ctx, linkWaitTimeout)
	defer cancel()
	for {
		link, err := netlink.LinkByName(name)
		if err == nil {
			return link, nil
		}
		var notFound netlink.LinkNotFoundError
		if !errors.As(err, &notFound) {
			return nil, fmt.Errorf("link %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("link %s did not appear: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// configureLink makes a link's MAC (when mac is set), MTU (when mtu > 0) and
// addresses match and sets it up, changing only what differs so that a second
// run does not disturb traffic.
func configureLink(ctx context.Context, name string, mac net.HardwareAddr, mtu int, addrs []*net.IPNet) (netlink.Link, error) {
	link, err := waitLink(ctx, name)
	if err != nil {
		return nil, err
	}
	if mac != nil && !bytes.Equal(link.Attrs().HardwareAddr, mac) {
		if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
			return nil, fmt.Errorf("link %s: set MAC %s: %w", name, mac, err)
		}
	}
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return nil, fmt.Errorf("link %s: set MTU %d: %w", name, mtu, err)
		}
	}
	if err := ensureAddrs(link, addrs); err != nil {
		return nil, err
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("link %s: set up: %w", name, err)
		}
	}
	return link, nil
}

// ensureAddrs adds the addresses link lacks.
func ensureAddrs(link netlink.Link, addrs []*net.IPNet) error {
	have, err := addrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	for _, want := range addrs {
		if hasAddr(have, want) {
			continue
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: want}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("link %s: add address %s: %w", link.Attrs().Name, want, err)
		}
	}
	return nil
}

func hasAddr(have []netlink.Addr, want *net.IPNet) bool {
	for _, a := range have {
		if a.IPNet.IP.Equal(want.IP) && bytes.Equal(a.IPNet.Mask, want.Mask) {
			return true
		}
	}
	return false
}

// addrList lists a link's addresses, retrying a dump the kernel interrupted.
func addrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	for i := 0; ; i++ {
		addrs, err := netlink.AddrList(link, family)
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("link %s: list addresses: %w", link.Attrs().Name, err)
		}
		return addrs, nil
	}
}

// routeList lists the main-table routes through a link, retrying an
// interrupted dump.
func routeList(link netlink.Link) ([]netlink.Route, error) {
	filter := &netlink.Route{LinkIndex: link.Attrs().Index, Table: unix.RT_TABLE_MAIN}
	for i := 0; ; i++ {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("link %s: list routes: %w", link.Attrs().Name, err)
		}
		return routes, nil
	}
}

// movableAddr says whether an address belongs to the node (global scope) as
// opposed to the link (IPv6 link-local), which must not follow it.
func movableAddr(a netlink.Addr) bool {
	return a.Scope == unix.RT_SCOPE_UNIVERSE && !a.IP.IsLinkLocalUnicast()
}

// findNodeIP returns want with its prefix as configured on link, or the
// link's first global address of underlayFamily when want is nil.
// underlayFamily is the family of the node address found on the uplink
// when none is configured: the one boundary of this package that
// dual-stack (an IPv6 underlay) widens.
const underlayFamily = types.IPv4

func findNodeIP(want net.IP, linkName string) (*net.IPNet, error) {
	if linkName == "" {
		if want == nil {
			return nil, errors.New("neither a node IP nor an uplink to find it on")
		}
		bits := types.FamilyOfIP(want).Bits()
		return &net.IPNet{IP: want, Mask: net.CIDRMask(bits, bits)}, nil
	}
	link, err := netlink.LinkByName(linkName)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", linkName, err)
	}
	addrs, err := addrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if !movableAddr(a) {
			continue
		}
		if (want == nil && types.FamilyOfIP(a.IP) == underlayFamily) || (want != nil && a.IP.Equal(want)) {
			return a.IPNet, nil
		}
	}
	if want != nil {
		return nil, fmt.Errorf("node IP %s is not on %s", want, linkName)
	}
	return nil, fmt.Errorf("link %s has no global IPv4 address to use as the node IP", linkName)
}

// ConfigureHostSidePort turns ARP off and IPv6 off on a link OVS owns in the
// node netns (a pod veth's host end, the uplink): with the userspace datapath
// the kernel still sees every frame on such a link and would otherwise answer
// ARP for node-local IPs with the link's own MAC (ENVIRONMENT.md). It runs in
// the current network namespace and changes nothing already set.
func ConfigureHostSidePort(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if link.Attrs().RawFlags&unix.IFF_NOARP == 0 {
		if err := netlink.LinkSetARPOff(link); err != nil {
			return fmt.Errorf("link %s: arp off: %w", name, err)
		}
	}
	path := filepath.Join("/proc/sys/net/ipv6/conf", name, "disable_ipv6")
	cur, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // IPv6 is not compiled in, or already gone for this link
	}
	if err != nil {
		return fmt.Errorf("link %s: read %s: %w", name, path, err)
	}
	if strings.TrimSpace(string(cur)) != "1" {
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("link %s: disable IPv6: %w", name, err)
		}
	}
	return nil
}

// appctl runs ovs-appctl against the ovs-vswitchd whose run directory is
// runDir: its control socket when that directory holds one named
// ovs-vswitchd.ctl (as ovsinstance starts it), otherwise the pid-file lookup
// ovs-appctl does by itself under OVS_RUNDIR.
func appctl(ctx context.Context, runDir string, args ...string) (string, error) {
	target := "ovs-vswitchd"
	if ctl := filepath.Join(runDir, "ovs-vswitchd.ctl"); runDir != "" {
		if _, err := os.Stat(ctl); err == nil {
			target = ctl
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ovs-appctl", append([]string{"-t", target}, args...)...)
	if runDir != "" {
		cmd.Env = append(os.Environ(), "OVS_RUNDIR="+runDir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ovs-appctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// PinTunnelNeighbor tells ovs-vswitchd the MAC of a remote node's underlay
// IP, reached through the underlay bridge, so tunnelled traffic never waits
// on (or loses packets to) an expired neighbour entry. The agent calls it
// for every remote node when its route is installed, again every 10 minutes
// (OVS ages even these entries, at most maxNeighAgingSeconds) and when
// ovs-vswitchd restarted (it forgets them).
func PinTunnelNeighbor(ctx context.Context, ovsRunDir, underlayBridge string, ip net.IP, mac net.HardwareAddr) error {
	if underlayBridge == "" {
		underlayBridge = DefaultUplinkBridgeName
	}
	if _, err := appctl(ctx, ovsRunDir, "tnl/neigh/set", underlayBridge, ip.String(), mac.String()); err != nil {
		return fmt.Errorf("pin tunnel neighbour %s (%s) on %s: %w", ip, mac, underlayBridge, err)
	}
	return nil
}
