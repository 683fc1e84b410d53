package externalippool

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// Errors of allocation, to test with errors.Is.
var (
	// ErrPoolNotFound: no ExternalIPPool has the name (or its ranges are bad).
	ErrPoolNotFound = errors.New("ExternalIPPool not found")
	// ErrExhausted: every IP of the pool is allocated.
	ErrExhausted = errors.New("no IP left in the ExternalIPPool")
	// ErrNotInPool: the IP is in none of the pool's ranges.
	ErrNotInPool = errors.New("IP is not in the ExternalIPPool's ranges")
	// ErrInUse: the IP is allocated to another owner.
	ErrInUse = errors.New("IP is allocated to another owner")
	// ErrNoRangeOfFamily: the pool has no range of the IP family asked for.
	ErrNoRangeOfFamily = errors.New("the ExternalIPPool has no IP range of that family")
)

// poolAllocator hands out the IPs of one pool's ranges: the lowest free IP
// first, so that allocation is deterministic. It is not safe for concurrent
// use (Controller locks it).
type poolAllocator struct {
	ranges []Range
	// owners maps each allocated IP to its owner ("Egress/name").
	owners map[netip.Addr]string
}

func newPoolAllocator(ranges []Range) *poolAllocator {
	return &poolAllocator{ranges: ranges, owners: map[netip.Addr]string{}}
}

func (p *poolAllocator) contains(ip netip.Addr) bool {
	for _, r := range p.ranges {
		if r.Contains(ip) {
			return true
		}
	}
	return false
}

// allocate gives owner the lowest free IP of the first range that has one.
// The scan skips allocated IPs one by one: it costs O(allocated), which a
// pool of Egress and LoadBalancer IPs keeps small.
func (p *poolAllocator) allocate(owner string) (netip.Addr, error) {
	return p.allocateOfFamily(owner, 0)
}

// allocateOfFamily is allocate among the ranges of one family: bits 32 for
// IPv4, 128 for IPv6, 0 for either.
func (p *poolAllocator) allocateOfFamily(owner string, bits int) (netip.Addr, error) {
	found := false
	for _, r := range p.ranges {
		if bits != 0 && r.First.BitLen() != bits {
			continue
		}
		found = true
		for ip := r.First; ip.IsValid() && ip.Compare(r.Last) <= 0; ip = ip.Next() {
			if _, used := p.owners[ip]; !used {
				p.owners[ip] = owner
				return ip, nil
			}
		}
	}
	if !found && bits != 0 {
		return netip.Addr{}, ErrNoRangeOfFamily
	}
	return netip.Addr{}, ErrExhausted
}

// allocateSpecific gives ip to owner; allocating an IP to its owner again is
// not an error.
func (p *poolAllocator) allocateSpecific(ip netip.Addr, owner string) error {
	ip = ip.Unmap()
	if !p.contains(ip) {
		return fmt.Errorf("%s: %w", ip, ErrNotInPool)
	}
	if cur, used := p.owners[ip]; used {
		if cur == owner {
			return nil
		}
		return fmt.Errorf("%s is allocated to %s: %w", ip, cur, ErrInUse)
	}
	p.owners[ip] = owner
	return nil
}

// release frees ip if owner holds it ("" frees it whoever holds it), and
// reports whether it did.
func (p *poolAllocator) release(ip netip.Addr, owner string) bool {
	ip = ip.Unmap()
	cur, used := p.owners[ip]
	if !used || (owner != "" && cur != owner) {
		return false
	}
	delete(p.owners, ip)
	return true
}

// total is the number of IPs of the ranges, at most math.MaxInt.
func (p *poolAllocator) total() int {
	t := 0
	for _, r := range p.ranges {
		s := r.Size()
		if t > math.MaxInt-s {
			return math.MaxInt
		}
		t += s
	}
	return t
}

func (p *poolAllocator) used() int { return len(p.owners) }

// reshape moves the allocations to new ranges, keeping those still inside,
// and returns the IPs dropped (and their owners).
func (p *poolAllocator) reshape(ranges []Range) map[netip.Addr]string {
	p.ranges = ranges
	dropped := map[netip.Addr]string{}
	for ip, owner := range p.owners {
		if !p.contains(ip) {
			dropped[ip] = owner
			delete(p.owners, ip)
		}
	}
	return dropped
}
