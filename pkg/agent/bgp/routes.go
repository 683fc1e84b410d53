package bgp

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// RouteType is the kind of IP a route advertises (upstream's names, which
// antctl get bgproutes prints and filters on).
type RouteType string

// The kinds of advertised routes.
const (
	RouteEgressIP              RouteType = "EgressIP"
	RouteServiceLoadBalancerIP RouteType = "ServiceLoadBalancerIP"
	RouteServiceExternalIP     RouteType = "ServiceExternalIP"
	RouteServiceClusterIP      RouteType = "ServiceClusterIP"
	RoutePodCIDR               RouteType = "NodeIPAMPodCIDR"
)

// RouteSource is where an advertised prefix comes from.
type RouteSource struct {
	Type RouteType
	// Object is the Service (NAMESPACE/NAME) or the Node it comes from.
	Object string
}

// Inputs are what the routes a Node advertises depend on.
type Inputs struct {
	NodeName string
	// Advertisements of the policy in effect on the Node.
	Advertisements crdv1alpha1.Advertisements
	PodCIDRs       []netip.Prefix
	Services       []*corev1.Service
	// Slices are the EndpointSlices, by the NAMESPACE/NAME of their Service.
	Slices map[string][]*discoveryv1.EndpointSlice
	// EgressIPs are the Egress IPs the Node holds.
	EgressIPs []netip.Addr
}

// Desired is the set of prefixes a Node advertises: its Pod CIDRs (pod),
// each held Egress IP (egress), and as host routes the Services' IPs of the
// listed types (service): ClusterIPs (internalTrafficPolicy Local: only
// with a ready endpoint on the Node), spec.externalIPs and the
// LoadBalancer ingress IPs (externalTrafficPolicy Local: only with a ready
// endpoint on the Node, since the others would drop the traffic), as
// upstream. A prefix from several sources keeps the first (order: pods,
// egress, Services by their order in Inputs).
func Desired(in Inputs) map[netip.Prefix]RouteSource {
	out := map[netip.Prefix]RouteSource{}
	add := func(p netip.Prefix, src RouteSource) {
		if _, ok := out[p]; !ok && p.IsValid() {
			out[p] = src
		}
	}
	adv := in.Advertisements
	if adv.Pod != nil {
		for _, c := range in.PodCIDRs {
			add(c.Masked(), RouteSource{Type: RoutePodCIDR, Object: in.NodeName})
		}
	}
	if adv.Egress != nil {
		for _, ip := range in.EgressIPs {
			add(hostPrefix(ip), RouteSource{Type: RouteEgressIP})
		}
	}
	if adv.Service == nil {
		return out
	}
	want := map[crdv1alpha1.ServiceIPType]bool{}
	for _, t := range adv.Service.IPTypes {
		want[t] = true
	}
	for _, svc := range in.Services {
		key := svc.Namespace + "/" + svc.Name
		localOnly := func(local bool) bool {
			return !local || hasLocalEndpoint(in.Slices[key], in.NodeName)
		}
		src := func(t RouteType) RouteSource { return RouteSource{Type: t, Object: key} }
		if want[crdv1alpha1.ServiceIPTypeClusterIP] && localOnly(isLocal(svc.Spec.InternalTrafficPolicy)) {
			ips := svc.Spec.ClusterIPs
			if len(ips) == 0 {
				ips = []string{svc.Spec.ClusterIP}
			}
			for _, s := range ips {
				add(parseHost(s), src(RouteServiceClusterIP))
			}
		}
		external := localOnly(svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal)
		if want[crdv1alpha1.ServiceIPTypeExternalIP] && external {
			for _, s := range svc.Spec.ExternalIPs {
				add(parseHost(s), src(RouteServiceExternalIP))
			}
		}
		if want[crdv1alpha1.ServiceIPTypeLoadBalancerIP] && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && external {
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				add(parseHost(ing.IP), src(RouteServiceLoadBalancerIP))
			}
		}
	}
	return out
}

func isLocal(p *corev1.ServiceInternalTrafficPolicy) bool {
	return p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal
}

// hasLocalEndpoint says whether one of the slices has a ready endpoint on
// node (a missing ready condition counts as ready, as the API says).
func hasLocalEndpoint(slices []*discoveryv1.EndpointSlice, node string) bool {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && *ep.NodeName == node && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				return true
			}
		}
	}
	return false
}

// parseHost is the host route of an IP string (invalid for "", "None" or
// garbage).
func parseHost(s string) netip.Prefix {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}
	}
	return hostPrefix(ip)
}

func hostPrefix(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen())
}
