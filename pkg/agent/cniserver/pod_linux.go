package cniserver

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

const (
	// hostIfPrefixLen and hostIfHashLen make host-side names of at most
	// IFNAMSIZ-1 = 15 bytes: 8 bytes of the pod name, '-', 6 hex digits.
	hostIfPrefixLen = 8
	hostIfHashLen   = 6
	// txChecksumFeature is the ethtool feature behind "ethtool -K eth0 tx off":
	// with the netdev datapath, packets a pod sends with checksum offload
	// reach OVS without a checksum and TCP fails (ENVIRONMENT.md).
	txChecksumFeature = "tx-checksum-ip-generic"
)

// hostInterfaceName derives the host-side veth name (also the OVS port name)
// from the pod and the container, as upstream does: readable (the pod name's
// head) and unique (a hash of namespace, name and container ID, so that a new
// sandbox of the same pod gets a new name). DEL can derive it again from its
// arguments when nothing else remembers it.
func hostInterfaceName(podNamespace, podName, containerID string) string {
	sum := sha1.Sum([]byte(podNamespace + "/" + podName + "/" + containerID))
	prefix := podName
	if len(prefix) > hostIfPrefixLen {
		prefix = prefix[:hostIfPrefixLen]
	}
	prefix = strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, prefix)
	if prefix == "" {
		prefix = "pod"
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:hostIfHashLen]
}

// podInterface is what createVeth made.
type podInterface struct {
	hostName string
	hostMAC  net.HardwareAddr
	podMAC   net.HardwareAddr
}

// createVeth creates the veth pair: the pod end named ifName inside the pod
// netns, the host end hostName in hostNetNS (the agent's netns when empty).
func createVeth(hostNetNS, netnsPath, ifName, hostName string, mtu int) (*podInterface, error) {
	var out podInterface
	// The callback runs in the pod netns and is given the namespace the
	// call came from, which is the host side unless hostNetNS says otherwise.
	err := ns.WithNetNSPath(netnsPath, func(origNS ns.NetNS) error {
		hostNS := origNS
		if hostNetNS != "" {
			h, err := ns.GetNS(hostNetNS)
			if err != nil {
				return fmt.Errorf("open host netns %s: %w", hostNetNS, err)
			}
			defer h.Close()
			hostNS = h
		}
		hostIf, contIf, err := ip.SetupVethWithName(ifName, hostName, mtu, "", hostNS)
		if err != nil {
			return fmt.Errorf("create veth pair %s (pod) / %s (host): %w", ifName, hostName, err)
		}
		out.hostName, out.hostMAC, out.podMAC = hostIf.Name, hostIf.HardwareAddr, contIf.HardwareAddr
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("in netns %s: %w", netnsPath, err)
	}
	return &out, nil
}

// configurePodInterface turns off the pod end's TX checksum offload and sets
// its addresses and routes. The host end is configured before (see
// configureHostSide).
func configurePodInterface(netnsPath, ifName string, ips []*current.IPConfig, routes []*types.Route) error {
	res := &current.Result{Interfaces: []*current.Interface{{Name: ifName}}, Routes: routes}
	for _, ipc := range ips {
		c := *ipc
		c.Interface = current.Int(0)
		res.IPs = append(res.IPs, &c)
	}
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		if err := disableTXChecksum(ifName); err != nil {
			return err
		}
		if err := skipDAD(ifName, ips); err != nil {
			return err
		}
		if err := ipam.ConfigureIface(ifName, res); err != nil {
			return fmt.Errorf("configure addresses and routes of %s: %w", ifName, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("in netns %s: %w", netnsPath, err)
	}
	return nil
}

// skipDAD turns IPv6 duplicate address detection off on the pod's
// interface when it gets an IPv6 address: IPAM allocated the address, so
// no other pod has it, and the spoof guard drops the probes (their source
// is ::) anyway; with it on, ConfigureIface waits for the address to
// leave the tentative state, about 2 s per ADD (hack/bench/cni.sh). A
// sysctl of the pod's own netns.
func skipDAD(ifName string, ips []*current.IPConfig) error {
	for _, c := range ips {
		if c.Address.IP.To4() != nil {
			continue
		}
		path := "/proc/sys/net/ipv6/conf/" + ifName + "/accept_dad"
		if err := os.WriteFile(path, []byte("0"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("turn off duplicate address detection on %s: %w", ifName, err)
		}
		return nil
	}
	return nil
}

// inNetNS runs fn in the netns at path, or right here when path is empty.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	return ns.WithNetNSPath(path, func(ns.NetNS) error { return fn() })
}

func disableTXChecksum(ifName string) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("open ethtool: %w", err)
	}
	defer e.Close()
	if err := e.Change(ifName, map[string]bool{txChecksumFeature: false}); err != nil {
		return fmt.Errorf("turn off %s on %s: %w", txChecksumFeature, ifName, err)
	}
	return nil
}

// configureHostSide stops the node kernel from answering ARP on the host end
// (it would answer for node-local addresses such as the gateway before OVS
// does) and from speaking IPv6 there: the port belongs to OVS.
//
// It must run before the end becomes an OVS port: an ARP-off made while
// ovs-vswitchd was opening the port was lost on the lab (1 host end of 5;
// most likely ovs-vswitchd, turning promiscuous mode on, wrote back link
// flags it had read before). The kernel then answers the pod's
// ARP for its gateway with the host end's MAC, and the pod's routed traffic
// goes through the node's kernel and back into OVS through the gateway,
// where the pod's egress policy (matched on its port) does not apply.
func configureHostSide(hostName string) error {
	link, err := netlink.LinkByName(hostName)
	if err != nil {
		return fmt.Errorf("find host veth %s: %w", hostName, err)
	}
	if err := netlink.LinkSetARPOff(link); err != nil {
		return fmt.Errorf("arp off on host veth %s: %w", hostName, err)
	}
	// The kernel accepts no packet from the pod on this end either, should
	// ARP ever come back on: strict reverse-path filtering of this link
	// alone (the pod's addresses are routed through the gateway, never
	// through its veth). A per-link setting of the node's netns, not a
	// global one.
	rp := fmt.Sprintf("/proc/sys/net/ipv4/conf/%s/rp_filter", hostName)
	if err := os.WriteFile(rp, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reverse-path filtering on host veth %s: %w", hostName, err)
	}
	p := fmt.Sprintf("/proc/sys/net/ipv6/conf/%s/disable_ipv6", hostName)
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disable IPv6 on host veth %s: %w", hostName, err)
	}
	return nil
}

// ensureHostSideARPOff turns ARP off on the host end again if it is on,
// saying so: ovs-vswitchd opening the port lost the setting.
func ensureHostSideARPOff(hostName string) error {
	link, err := netlink.LinkByName(hostName)
	if err != nil {
		return fmt.Errorf("find host veth %s: %w", hostName, err)
	}
	if link.Attrs().RawFlags&unix.IFF_NOARP != 0 {
		return nil
	}
	klog.InfoS("ARP came back on a pod's host veth once ovs-vswitchd opened it; turning it off again", "veth", hostName)
	if err := netlink.LinkSetARPOff(link); err != nil {
		return fmt.Errorf("arp off on host veth %s: %w", hostName, err)
	}
	return nil
}

// deleteHostInterface deletes the host end of a pod's veth pair (which takes
// the pod end with it); a missing link is not an error.
func deleteHostInterface(hostName string) error {
	link, err := netlink.LinkByName(hostName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("find host veth %s: %w", hostName, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete host veth %s: %w", hostName, err)
	}
	return nil
}

// hostInterfaceProblem says what is wrong with the host end ("" if nothing).
func hostInterfaceProblem(hostName string) string {
	link, err := netlink.LinkByName(hostName)
	if err != nil {
		return fmt.Sprintf("host veth %s is missing", hostName)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Sprintf("host veth %s is down", hostName)
	}
	if link.Attrs().RawFlags&unix.IFF_NOARP == 0 {
		return fmt.Sprintf("host veth %s answers ARP (the node kernel would take the pod's traffic past OVS)", hostName)
	}
	return ""
}

// podInterfaceProblems lists what is wrong with the pod end: missing link,
// addresses or default routes.
func podInterfaceProblems(netnsPath, ifName string, ips []net.IP, gateways []net.IP) []string {
	var problems []string
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			problems = append(problems, fmt.Sprintf("interface %s is missing in the pod", ifName))
			return nil
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			problems = append(problems, fmt.Sprintf("interface %s is down", ifName))
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list addresses of %s: %w", ifName, err)
		}
		for _, want := range ips {
			found := false
			for _, a := range addrs {
				if a.IP.Equal(want) {
					found = true
					break
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("address %s is missing on %s", want, ifName))
			}
		}
		routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list routes of %s: %w", ifName, err)
		}
		for _, gw := range gateways {
			found := false
			for _, r := range routes {
				if (r.Dst == nil || isDefault(r.Dst)) && r.Gw.Equal(gw) {
					found = true
					break
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("default route via %s is missing on %s", gw, ifName))
			}
		}
		return nil
	})
	if err != nil {
		problems = append(problems, fmt.Sprintf("cannot inspect netns %s: %v", netnsPath, err))
	}
	return problems
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}
