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
// source the kernel picks for the node's own traffic (an IP of a pool with
// subnetInfo: with its subnet's prefix, on its VLAN's link when it has one;
// subnet.go), and (IPv4) carries
// the label "<link>:ae" so that an agent restarting finds the ones it
// added (Sync removes those no longer wanted). When ovs-vswitchd restarts,
// its tap, and the addresses on it, go: Sync puts them back.
type IPAssigner struct {
	link string

	mu sync.Mutex
	// announce sends the gratuitous ARPs (garp.Announce; tests count them).
	announce func(link string, ip net.IP) error
	// subnets are the subnets of the IPs of pools with subnetInfo
	// (SetSubnets): such an IP is held with its subnet's prefix, on its
	// VLAN's link when it has one.
	subnets map[netip.Addr]Subnet
	// vlans makes the VLAN links (nil: IPs on a VLAN are refused).
	vlans VLANLinks
}

// NewIPAssigner holds IPs on link; vlans (may be nil) makes the links of
// the subnets on a VLAN.
func NewIPAssigner(link string, vlans VLANLinks) *IPAssigner {
	return &IPAssigner{link: link, vlans: vlans, announce: func(link string, ip net.IP) error {
		return garp.Announce(link, ip, 3, 200*time.Millisecond)
	}}
}

// Link is the interface the IPs are held on.
func (a *IPAssigner) Link() string { return a.link }

// SetSubnets tells the subnets of the IPs that have one (the next Add or
// Sync places them).
func (a *IPAssigner) SetSubnets(subnets map[netip.Addr]Subnet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.subnets = subnets
}

// label is the address label marking the IPv4 addresses this assigner added
// ("" when the interface name leaves no room: IFNAMSIZ).
func (a *IPAssigner) label() string {
	l := a.link + ":ae"
	if len(l) > unix.IFNAMSIZ-1 {
		return ""
	}
	return l
}

// heldAddr is an external IP on a link.
type heldAddr struct {
	ip   netip.Addr
	link netlink.Link
	addr netlink.Addr
}

// Held lists the external IPs held: on the link, the IPv4 addresses that
// carry the label and the IPv6 ones added without duplicate address
// detection (the link's own addresses have neither); on the VLAN links,
// every address.
func (a *IPAssigner) Held() ([]netip.Addr, error) {
	held, err := a.held()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(held))
	for _, h := range held {
		out = append(out, h.ip)
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(out), nil
}

func (a *IPAssigner) held() ([]heldAddr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("external IPs: list links: %w", err)
	}
	var out []heldAddr
	found := false
	for _, l := range links {
		name := l.Attrs().Name
		vlan := isVLANLink(name)
		if name != a.link && !vlan {
			continue
		}
		found = found || name == a.link
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("external IPs: addresses of %s: %w", name, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			if !ok || ad.Scope != unix.RT_SCOPE_UNIVERSE {
				continue
			}
			ip = ip.Unmap()
			if !vlan {
				if ip.Is4() && (a.label() == "" || ad.Label != a.label()) {
					continue
				}
				if ip.Is6() && ad.Flags&unix.IFA_F_NODAD == 0 {
					continue
				}
			}
			out = append(out, heldAddr{ip: ip, link: l, addr: ad})
		}
	}
	if !found {
		return nil, fmt.Errorf("external IPs: link %s not found", a.link)
	}
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
	held, err := a.held()
	if err != nil {
		return nil, err
	}
	var errs []error
	// In place: wanted and on its link with its prefix. An IP whose subnet
	// changed is moved (removed here, added below) even by Add.
	placed := map[netip.Addr]bool{}
	for _, h := range held {
		link, bits := a.placement(h.ip)
		ones, _ := h.addr.Mask.Size()
		if slices.Contains(want, h.ip) && h.link.Attrs().Name == link && ones == bits {
			placed[h.ip] = true
			continue
		}
		if !remove && !slices.Contains(want, h.ip) {
			continue
		}
		if err := netlink.AddrDel(h.link, &h.addr); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("remove external IP %s from %s: %w", h.ip, h.link.Attrs().Name, err))
			continue
		}
		klog.InfoS("Released external IP", "ip", h.ip, "link", h.link.Attrs().Name)
	}
	var added []netip.Addr
	vlans := []int{}
	for _, ip := range want {
		if s, ok := a.subnets[ip]; ok && s.VLAN > 0 && !slices.Contains(vlans, s.VLAN) {
			vlans = append(vlans, s.VLAN)
		}
		if placed[ip] {
			continue
		}
		name, bits := a.placement(ip)
		if s := a.subnets[ip]; s.VLAN > 0 {
			if a.vlans == nil {
				errs = append(errs, fmt.Errorf("external IP %s: its pool's subnet is on VLAN %d, and VLANs need the userspace datapath's br-phy", ip, s.VLAN))
				continue
			}
			if err := a.vlans.Ensure(s.VLAN); err != nil {
				errs = append(errs, fmt.Errorf("external IP %s: %w", ip, err))
				continue
			}
		}
		link, err := netlink.LinkByName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("external IPs: link %s: %w", name, err))
			continue
		}
		if err := netlink.AddrAdd(link, a.addr(ip, name, bits)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add external IP %s to %s: %w", ip, name, err))
			continue
		}
		added = append(added, ip)
		klog.InfoS("Holding external IP", "ip", ip, "link", name, "prefixLength", bits)
		if err := a.announce(name, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce external IP; neighbours learn it when their entry expires", "ip", ip, "link", name)
		}
	}
	if remove && a.vlans != nil {
		if err := a.vlans.Keep(vlans); err != nil {
			errs = append(errs, err)
		}
	}
	return added, errors.Join(errs...)
}

// placement is the link ip goes on and its prefix length.
func (a *IPAssigner) placement(ip netip.Addr) (string, int) {
	if s, ok := a.subnets[ip]; ok {
		if s.VLAN > 0 {
			return VLANLink(s.VLAN), s.Prefix.Bits()
		}
		return a.link, s.Prefix.Bits()
	}
	return a.link, ip.BitLen()
}

// Announce sends gratuitous ARP for ips again (IPv4 ones): after the
// membership changed, a node that kept holding an IP while cut off from the
// others makes the neighbours that learned another holder's MAC meanwhile
// come back to it.
func (a *IPAssigner) Announce(ips []netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ip := range ips {
		link, _ := a.placement(ip)
		if err := a.announce(link, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce external IP", "ip", ip, "link", link)
		}
	}
}

func (a *IPAssigner) addr(ip netip.Addr, link string, bits int) *netlink.Addr {
	ad := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(bits, ip.BitLen())}}
	if ip.Is4() && link == a.link {
		ad.Label = a.label()
	}
	if ip.Is6() {
		// No duplicate address detection: the IP moves between nodes,
		// and a node that takes it must answer at once.
		ad.Flags = unix.IFA_F_NODAD
	}
	return ad
}
