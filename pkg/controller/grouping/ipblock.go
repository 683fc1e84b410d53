package grouping

import (
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// IPBlock is an ipBlock peer in the form Pod addresses are matched against:
// a CIDR minus its exceptions, all masked, IPv4 in its 4-byte form.
type IPBlock struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// NewIPBlockSelector returns the selector of the Pods with an address in cidr
// and in none of except. Kubernetes resolves a named port of an egress rule
// on the destination Pod, whichever kind of peer matched the Pod's address,
// so an ipBlock peer of such a rule needs the Pods it covers and their ports.
// Exceptions that cannot exclude an address of cidr are dropped and the rest
// sorted, so that blocks written alike share one key. cidr must be valid.
func NewIPBlockSelector(cidr netip.Prefix, except []netip.Prefix) *Selector {
	b := &IPBlock{CIDR: unmapPrefix(cidr)}
	for _, e := range except {
		e = unmapPrefix(e)
		if e.Addr().Is4() == b.CIDR.Addr().Is4() && e.Overlaps(b.CIDR) {
			b.Except = append(b.Except, e)
		}
	}
	slices.SortFunc(b.Except, func(x, y netip.Prefix) int {
		if c := x.Addr().Compare(y.Addr()); c != 0 {
			return c
		}
		return x.Bits() - y.Bits()
	})
	b.Except = slices.Compact(b.Except)
	s := &Selector{IPBlock: b}
	s.key = normalize(s)
	return s
}

// unmapPrefix masks p and turns an IPv4-mapped IPv6 prefix that holds only
// IPv4-mapped addresses into IPv4.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	return netip.PrefixFrom(a, bits).Masked()
}

// Contains tells whether ip is in the CIDR and in none of the exceptions.
func (b *IPBlock) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !b.CIDR.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		if e.Contains(ip) {
			return false
		}
	}
	return true
}

func (b *IPBlock) containsAny(ips []netip.Addr) bool {
	for _, ip := range ips {
		if b.Contains(ip) {
			return true
		}
	}
	return false
}

// String is "10.0.0.0/8" or "10.0.0.0/8 except 10.1.0.0/16,10.2.0.0/16".
func (b *IPBlock) String() string {
	if len(b.Except) == 0 {
		return b.CIDR.String()
	}
	parts := make([]string, len(b.Except))
	for i, e := range b.Except {
		parts[i] = e.String()
	}
	return b.CIDR.String() + " except " + strings.Join(parts, ",")
}

// podAddrs parses a Pod's addresses, from status.podIPs or status.podIP.
func podAddrs(pod *v1.Pod) []netip.Addr {
	if len(pod.Status.PodIPs) == 0 {
		if a, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			return []netip.Addr{a.Unmap()}
		}
		return nil
	}
	out := make([]netip.Addr, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// sameAddrs tells whether a Pod update leaves its addresses as they were.
func sameAddrs(old, cur *v1.Pod) bool {
	return old.Status.PodIP == cur.Status.PodIP && slices.Equal(old.Status.PodIPs, cur.Status.PodIPs)
}

// bucketBits is the prefix length by which Pods are filed near their
// addresses (IPv4, IPv6): a node's range usually holds whole buckets.
var bucketBits = [2]int{24, 120}

// blockIndex files ipBlock groups by CIDR so that a Pod event finds the
// blocks covering its addresses with one map lookup per address and prefix
// length in use, whatever the numbers of blocks and Pods. While a block is
// registered it also holds every Pod's parsed addresses and files the Pods
// by the bucket of each address, so that registering a block visits the
// Pods of the buckets it overlaps rather than every Pod. Without blocks it
// holds nothing, and Pod events cost it nothing.
type blockIndex struct {
	byCIDR map[netip.Prefix]set[*groupItem]
	// count is the number of CIDRs filed per address family (0: IPv4,
	// 1: IPv6) and prefix length; lengths lists the lengths in use, sorted.
	count   [2][129]int
	lengths [2][]int
	addrs   map[*podItem][]netip.Addr
	near    map[netip.Prefix]set[*podItem]
}

func newBlockIndex() *blockIndex {
	return &blockIndex{byCIDR: map[netip.Prefix]set[*groupItem]{}}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// active tells whether a block is registered.
func (x *blockIndex) active() bool { return len(x.byCIDR) > 0 }

// activate parses and files every Pod, before the first block is added.
func (x *blockIndex) activate(pods map[string]*podItem) {
	x.addrs = make(map[*podItem][]netip.Addr, len(pods))
	x.near = map[netip.Prefix]set[*podItem]{}
	for _, p := range pods {
		x.file(p, podAddrs(p.pod))
	}
}

func (x *blockIndex) file(p *podItem, ips []netip.Addr) {
	x.addrs[p] = ips
	for _, ip := range ips {
		b, _ := ip.Prefix(bucketBits[family(ip)])
		s := x.near[b]
		if s == nil {
			s = set[*podItem]{}
			x.near[b] = s
		}
		s[p] = struct{}{}
	}
}

// unfile forgets a Pod; it does nothing while no block is registered.
func (x *blockIndex) unfile(p *podItem) {
	if !x.active() {
		return
	}
	for _, ip := range x.addrs[p] {
		b, _ := ip.Prefix(bucketBits[family(ip)])
		if s := x.near[b]; s != nil {
			delete(s, p)
			if len(s) == 0 {
				delete(x.near, b)
			}
		}
	}
	delete(x.addrs, p)
}

// repod re-files a Pod whose addresses may have changed (old is nil for a
// new Pod) and returns its previous and current addresses; it does nothing
// while no block is registered.
func (x *blockIndex) repod(p *podItem, old, cur *v1.Pod) (prev, now []netip.Addr) {
	if !x.active() {
		return nil, nil
	}
	prev = x.addrs[p]
	if old != nil && sameAddrs(old, cur) {
		return prev, prev
	}
	x.unfile(p)
	now = podAddrs(cur)
	x.file(p, now)
	return prev, now
}

func (x *blockIndex) add(g *groupItem) {
	cidr := g.sel.IPBlock.CIDR
	s := x.byCIDR[cidr]
	if s == nil {
		s = set[*groupItem]{}
		x.byCIDR[cidr] = s
		f := family(cidr.Addr())
		if x.count[f][cidr.Bits()]++; x.count[f][cidr.Bits()] == 1 {
			x.lengths[f] = append(x.lengths[f], cidr.Bits())
			slices.Sort(x.lengths[f])
		}
	}
	s[g] = struct{}{}
}

// remove forgets a group; after the last one the Pods are no longer filed.
func (x *blockIndex) remove(g *groupItem) {
	cidr := g.sel.IPBlock.CIDR
	s := x.byCIDR[cidr]
	delete(s, g)
	if len(s) > 0 {
		return
	}
	delete(x.byCIDR, cidr)
	f := family(cidr.Addr())
	if x.count[f][cidr.Bits()]--; x.count[f][cidr.Bits()] == 0 {
		x.lengths[f] = slices.DeleteFunc(x.lengths[f], func(l int) bool { return l == cidr.Bits() })
	}
	if !x.active() {
		x.addrs, x.near = nil, nil
	}
}

// holds tells whether b holds an address of p.
func (x *blockIndex) holds(b *IPBlock, p *podItem) bool { return b.containsAny(x.addrs[p]) }

// covered calls visit for every Pod with an address in b, visiting only the
// Pods filed in the buckets b overlaps (possibly a Pod more than once).
func (x *blockIndex) covered(b *IPBlock, visit func(*podItem)) {
	bits := bucketBits[family(b.CIDR.Addr())]
	check := func(pods set[*podItem]) {
		for p := range pods {
			if x.holds(b, p) {
				visit(p)
			}
		}
	}
	if b.CIDR.Bits() >= bits {
		bucket, _ := b.CIDR.Addr().Prefix(bits)
		check(x.near[bucket])
		return
	}
	for bucket, pods := range x.near {
		if b.CIDR.Overlaps(bucket) {
			check(pods)
		}
	}
}

// candidates calls visit for every group whose CIDR holds one of ips; the
// caller checks the exceptions. A group holding several of the addresses is
// visited once per address.
func (x *blockIndex) candidates(ips []netip.Addr, visit func(*groupItem)) {
	if !x.active() {
		return
	}
	for _, ip := range ips {
		for _, l := range x.lengths[family(ip)] {
			p, err := ip.Prefix(l)
			if err != nil {
				continue
			}
			for g := range x.byCIDR[p] {
				visit(g)
			}
		}
	}
}
