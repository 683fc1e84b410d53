package v1beta1

import (
	"fmt"
	"math"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/resource"
)

// KbitsOf reads one field of a Bandwidth (a quantity of bits: 300k, 10M,
// 2G) in kilobits, as an OpenFlow meter takes it: from 1k to 4T.
func KbitsOf(v string) (uint32, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("must be a quantity such as 300k, 10M or 2G")
	}
	k := q.Value() / 1000
	if q.Sign() <= 0 || k < 1 || k > math.MaxUint32 {
		return 0, fmt.Errorf("must be from 1k to 4T (bits)")
	}
	return uint32(k), nil
}

// Kbits is the bandwidth's rate and burst in kilobits; an error names the
// field.
func (b *Bandwidth) Kbits() (rate, burst uint32, err error) {
	if rate, err = KbitsOf(b.Rate); err != nil {
		return 0, 0, fmt.Errorf("bandwidth.rate %q: %w", b.Rate, err)
	}
	if burst, err = KbitsOf(b.Burst); err != nil {
		return 0, 0, fmt.Errorf("bandwidth.burst %q: %w", b.Burst, err)
	}
	return rate, burst, nil
}

// EgressIPSlot is one IP of an Egress and the pool it comes from ("" for an
// IP the operator placed). IP is the zero Addr while none is given or
// allocated yet, or when the field does not parse (admission refuses that).
// Not an API type: no deepcopy.
// +k8s:deepcopy-gen=false
type EgressIPSlot struct {
	Pool string
	IP   netip.Addr
}

// IPSlots lists the Egress's IPs: one for egressIP and externalIPPool, or one
// per entry of externalIPPools with the egressIPs entry of the same index
// (upstream's fields for an Egress with an IP of each family).
func (e *Egress) IPSlots() []EgressIPSlot {
	parse := func(s string) netip.Addr {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}
		}
		return ip.Unmap()
	}
	if len(e.Spec.ExternalIPPools) == 0 {
		if len(e.Spec.EgressIPs) > 0 && e.Spec.EgressIP == "" && e.Spec.ExternalIPPool == "" {
			// egressIPs without pools: the operator's IPs.
			out := make([]EgressIPSlot, len(e.Spec.EgressIPs))
			for i, s := range e.Spec.EgressIPs {
				out[i].IP = parse(s)
			}
			return out
		}
		return []EgressIPSlot{{Pool: e.Spec.ExternalIPPool, IP: parse(e.Spec.EgressIP)}}
	}
	out := make([]EgressIPSlot, len(e.Spec.ExternalIPPools))
	for i, p := range e.Spec.ExternalIPPools {
		out[i].Pool = p
		if i < len(e.Spec.EgressIPs) {
			out[i].IP = parse(e.Spec.EgressIPs[i])
		}
	}
	return out
}
