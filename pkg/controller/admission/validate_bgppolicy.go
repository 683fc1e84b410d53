package admission

import (
	"context"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// Upstream's bounds of a BGPPolicy's numbers (its CRD schema,
// docs/bgp-policy.md): 16-bit ASNs, TCP ports, IP TTLs, RFC 4724's restart
// time as upstream caps it, RFC 4271's hold time (0, or at least 3).
const (
	minASN, maxASN             = 1, 65535
	minPort, maxPort           = 1, 65535
	minTTL, maxTTL             = 1, 255
	minRestartTime, maxRestart = 1, 3600
	minHoldTime, maxTimer      = 3, 65535
)

// ValidateBGPPolicy refuses what upstream's BGPPolicy refuses, naming the
// field: an ASN, port, TTL or timer out of range, a nodeSelector that does
// not parse, an unknown or repeated Service IP type, a peer address that is
// no IP address, and two peers with the same address (a speaker keeps one
// session per peer address).
func (v *Validator) ValidateBGPPolicy(_ context.Context, p *crdv1alpha1.BGPPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	inRange := func(path *field.Path, val, lo, hi int32) {
		if val < lo || val > hi {
			errs = append(errs, field.Invalid(path, val, fmt.Sprintf("must be in %d-%d", lo, hi)))
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector); err != nil {
		errs = append(errs, field.Invalid(spec.Child("nodeSelector"), p.Spec.NodeSelector, err.Error()))
	}
	inRange(spec.Child("localASN"), p.Spec.LocalASN, minASN, maxASN)
	if p.Spec.ListenPort != nil {
		inRange(spec.Child("listenPort"), *p.Spec.ListenPort, minPort, maxPort)
	}
	if c := p.Spec.Confederation; c != nil {
		inRange(spec.Child("confederation", "identifier"), c.Identifier, minASN, maxASN)
		for i, m := range c.MemberASNs {
			inRange(spec.Child("confederation", "memberASNs").Index(i), m, minASN, maxASN)
		}
	}
	if s := p.Spec.Advertisements.Service; s != nil {
		seen := map[crdv1alpha1.ServiceIPType]bool{}
		path := spec.Child("advertisements", "service", "ipTypes")
		for i, t := range s.IPTypes {
			switch t {
			case crdv1alpha1.ServiceIPTypeClusterIP, crdv1alpha1.ServiceIPTypeExternalIP, crdv1alpha1.ServiceIPTypeLoadBalancerIP:
			default:
				errs = append(errs, field.NotSupported(path.Index(i), t, []string{string(crdv1alpha1.ServiceIPTypeClusterIP),
					string(crdv1alpha1.ServiceIPTypeExternalIP), string(crdv1alpha1.ServiceIPTypeLoadBalancerIP)}))
				continue
			}
			if seen[t] {
				errs = append(errs, field.Duplicate(path.Index(i), t))
			}
			seen[t] = true
		}
	}
	peers := map[netip.Addr]int{}
	for i, peer := range p.Spec.BGPPeers {
		path := spec.Child("bgpPeers").Index(i)
		addr, err := netip.ParseAddr(peer.Address)
		switch {
		case err != nil || addr.Zone() != "":
			errs = append(errs, field.Invalid(path.Child("address"), peer.Address, "must be an IPv4 or IPv6 address"))
		case addr.IsUnspecified() || addr.IsMulticast():
			errs = append(errs, field.Invalid(path.Child("address"), peer.Address, "must be a unicast address"))
		default:
			if first, ok := peers[addr.Unmap()]; ok {
				errs = append(errs, field.Duplicate(path.Child("address"), fmt.Sprintf("%s (the address of bgpPeers[%d])", peer.Address, first)))
			} else {
				peers[addr.Unmap()] = i
			}
		}
		inRange(path.Child("asn"), peer.ASN, minASN, maxASN)
		if peer.Port != nil {
			inRange(path.Child("port"), *peer.Port, minPort, maxPort)
		}
		if peer.MultihopTTL != nil {
			inRange(path.Child("multihopTTL"), *peer.MultihopTTL, minTTL, maxTTL)
		}
		if peer.GracefulRestartTimeSeconds != nil {
			inRange(path.Child("gracefulRestartTimeSeconds"), *peer.GracefulRestartTimeSeconds, minRestartTime, maxRestart)
		}
		if peer.KeepaliveTimeSeconds != nil {
			inRange(path.Child("keepaliveTimeSeconds"), *peer.KeepaliveTimeSeconds, 1, maxTimer)
		}
		if h := peer.HoldTimeSeconds; h != nil && *h != 0 {
			inRange(path.Child("holdTimeSeconds"), *h, minHoldTime, maxTimer)
		}
	}
	return errs
}
