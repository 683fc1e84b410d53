package v1beta1

import (
	"fmt"
	"math"

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
