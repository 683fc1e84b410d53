package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/util/garp"
)

// IPAssigner holds external IPs (Egress IPs, later LoadBalancer IPs) on the
// node's transport interface: the interface that has the node's own
// address, so the node's kernel answers ARP for them on the underlay.
//
// Upstream puts them on a dummy device (antrea-egress0) and answers ARP
// itself. This kernel has no dummy driver (ENVIRONMENT.md), and with the
// userspace datapath the node's address lives on br-phy's internal port, a
// tap of ovs-vswitchd: an extra address there is answered by the kernel
// exactly as the node's own, with no responder of ours to keep alive. Each
// IP is added as a /32 (/128) so it adds no route and never becomes the
// source the kernel picks for the node's own traffic, and (IPv4) carries
// the label "<link>:ae" so that an agent restarting finds the ones it
// added (Sync removes those no longer wanted). When ovs-vswitchd restarts,
// its tap, and the addresses on it, go: Sync puts them back.
type IPAssigner struct {
	link string

	mu sync.Mutex
	// announce sends the gratuitous ARPs (garp.Announce; tests count them).
	announce func(link string, ip net.IP) error
}

// NewIPAssigner holds IPs on link.
func NewIPAssigner(link string) *IPAssigner {
	return &IPAssigner{link: link, announce: func(link string, ip net.IP) error {
		return garp.Announce(link, ip, 3, 200*time.Millisecond)
	}}
}

// Link is the interface the IPs are held on.
func (a *IPAssigner) Link() string { return a.link }

// label is the address label marking the IPv4 addresses this assigner added
// ("" when the interface name leaves no room: IFNAMSIZ).
func (a *IPAssigner) label() string {
	l := a.link + ":ae"
	if len(l) > unix.IFNAMSIZ-1 {
		return ""
	}
	return l
}

// Held lists the external IPs on the link (the ones carrying the label;
// IPv6 addresses have no label: the /128s that are not the link's own
// addresses in want are taken as ours when their flags say so).
func (a *IPAssigner) Held() ([]netip.Addr, error) {
	link, err := netlink.LinkByName(a.link)
	if err != nil {
		return nil, fmt.Errorf("external IPs: link %s: %w", a.link, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("external IPs: addresses of %s: %w", a.link, err)
	}
	var out []netip.Addr
	for _, ad := range addrs {
		ip, ok := netip.AddrFromSlice(ad.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		ones, bits := ad.Mask.Size()
		if ones != bits {
			continue
		}
		if ip.Is4() && (a.label() == "" || ad.Label != a.label()) {
			continue
		}
		if ip.Is6() && ad.Flags&unix.IFA_F_NODAD == 0 {
			continue
		}
		out = append(out, ip)
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return out, nil
}

// IsLocalUnheld says whether ip is an address of this node that the
// assigner did not add (the operator's, as an egressIP without a pool).
func (a *IPAssigner) IsLocalUnheld(ip netip.Addr) bool {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return false
	}
	for _, ad := range addrs {
		if a2, ok := netip.AddrFromSlice(ad.IP); ok && a2.Unmap() == ip {
			return ad.Label == "" || ad.Label != a.label()
		}
	}
	return false
}

// Sync makes the external IPs on the link exactly want: it adds (and
// announces) the missing ones and removes the others it added. It returns
// the IPs it added.
func (a *IPAssigner) Sync(want []netip.Addr) ([]netip.Addr, error) { return a.sync(want, true) }

// Add adds (and announces) the IPs of want missing on the link and removes
// none: the first half of a change, before the traffic moves.
func (a *IPAssigner) Add(want []netip.Addr) ([]netip.Addr, error) { return a.sync(want, false) }

func (a *IPAssigner) sync(want []netip.Addr, remove bool) ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, err := a.Held()
	if err != nil {
		return nil, err
	}
	link, err := netlink.LinkByName(a.link)
	if err != nil {
		return nil, fmt.Errorf("external IPs: link %s: %w", a.link, err)
	}
	var errs []error
	for _, ip := range held {
		if !remove || slices.Contains(want, ip) {
			continue
		}
		if err := netlink.AddrDel(link, a.addr(ip)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("remove external IP %s from %s: %w", ip, a.link, err))
			continue
		}
		klog.InfoS("Released external IP", "ip", ip, "link", a.link)
	}
	var added []netip.Addr
	for _, ip := range want {
		if slices.Contains(held, ip) {
			continue
		}
		if err := netlink.AddrAdd(link, a.addr(ip)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add external IP %s to %s: %w", ip, a.link, err))
			continue
		}
		added = append(added, ip)
		klog.InfoS("Holding external IP", "ip", ip, "link", a.link)
		if err := a.announce(a.link, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce external IP; neighbours learn it when their entry expires", "ip", ip, "link", a.link)
		}
	}
	return added, errors.Join(errs...)
}

// Announce sends gratuitous ARP for ips again (IPv4 ones): after the
// membership changed, a node that kept holding an IP while cut off from the
// others makes the neighbours that learned another holder's MAC meanwhile
// come back to it.
func (a *IPAssigner) Announce(ips []netip.Addr) {
	for _, ip := range ips {
		if err := a.announce(a.link, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce external IP", "ip", ip, "link", a.link)
		}
	}
}

func (a *IPAssigner) addr(ip netip.Addr) *netlink.Addr {
	bits := 32
	if ip.Is6() {
		bits = 128
	}
	ad := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(bits, bits)}}
	if ip.Is4() {
		ad.Label = a.label()
	} else {
		// No duplicate address detection: the IP moves between nodes,
		// and a node that takes it must answer at once.
		ad.Flags = unix.IFA_F_NODAD
	}
	return ad
}
