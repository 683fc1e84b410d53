package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// Reasons of the Warning Events the proxy posts on a Service it cannot
// realize wholly; every other port and Service keeps working.
const (
	// ReasonSCTPNotSupported: the Service's SCTP ports are not realized.
	ReasonSCTPNotSupported = "SCTPNotSupported"
	// ReasonIPv6NotSupported: the Service's IPv6 addresses are not
	// realized (the whole Service, when it has no IPv4 ClusterIP).
	ReasonIPv6NotSupported = "IPv6NotSupported"
	// ReasonPortConflict: an address and port of the Service is realized
	// for another Service (two Services listing the same external IP and
	// port); this one gets it once the other lets go.
	ReasonPortConflict = "PortConflict"
	// ReasonFailedToStartHealthcheck: the healthCheckNodePort cannot be
	// served (kube-proxy's reason for the same failure).
	ReasonFailedToStartHealthcheck = "FailedToStartServiceHealthcheck"
)

// warning is one reason a Service is not wholly realized.
type warning struct{ reason, message string }

// warned is what was posted about one Service: the Events of one
// generation of it, each once.
type warned struct {
	uid        types.UID
	generation int64
	posted     map[warning]bool
}

// unrealized lists what of a Service the data path does not realize, for
// reasons of the Service itself: SCTP ports, addresses of a family the node
// does not carry (fams: nodeView.families; IPv6 on an IPv4 node). Headless
// Services, ExternalName Services and LoadBalancer ingress IPs whose ipMode
// is Proxy are not realized by design and warn nothing.
func unrealized(svc *corev1.Service, datapath string, fams []agenttypes.IPFamily) []warning {
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || (svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0) {
		return nil
	}
	var out []warning
	var sctp []string
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol == corev1.ProtocolSCTP {
			sctp = append(sctp, portName(sp))
		}
	}
	if len(sctp) > 0 {
		why := "AntreaProxy does not realize SCTP ports yet"
		if datapath == "netdev" {
			why = "the OVS userspace datapath's conntrack keeps no SCTP ports, so it cannot DNAT an association to an endpoint's port"
		}
		out = append(out, warning{ReasonSCTPNotSupported, fmt.Sprintf("SCTP port(s) %s not realized: %s; the other ports work", strings.Join(sctp, ", "), why)})
	}
	clusterIPs := svc.Spec.ClusterIPs
	if len(clusterIPs) == 0 {
		clusterIPs = []string{svc.Spec.ClusterIP}
	}
	realized := familyNames(fams)
	carried := func(a netip.Addr) bool { return slices.Contains(fams, agenttypes.FamilyOf(a)) }
	if !slices.ContainsFunc(agenttypes.ServiceClusterIPs(svc), carried) {
		out = append(out, warning{ReasonIPv6NotSupported, fmt.Sprintf("Service not realized: this node carries %s only, and its ClusterIPs (%s) are not %s", realized, strings.Join(clusterIPs, ", "), realized)})
		return out
	}
	// The addresses of the families familyState computes but desiredState
	// does not join.
	var other []string
	unrealizedOf := func(kind string, ss ...string) {
		for _, s := range ss {
			if a, err := netip.ParseAddr(s); err == nil && !carried(a) {
				other = append(other, kind+" "+s)
			}
		}
	}
	unrealizedOf("ClusterIP", clusterIPs...)
	unrealizedOf("external IP", svc.Spec.ExternalIPs...)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IPMode != nil && *in.IPMode == corev1.LoadBalancerIPModeProxy {
				continue
			}
			unrealizedOf("load balancer IP", in.IP)
		}
	}
	if len(other) > 0 {
		out = append(out, warning{ReasonIPv6NotSupported, fmt.Sprintf("%s not realized: this node carries %s only; the %s addresses work", strings.Join(other, ", "), realized, realized)})
	}
	return out
}

func portName(sp corev1.ServicePort) string {
	if sp.Name == "" {
		return fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
	}
	return fmt.Sprintf("%s (%d/%s)", sp.Name, sp.Port, sp.Protocol)
}

// conflictWarning says which ports of the Service another Service holds.
func conflictWarning(taken []agentof.ServicePort, owner func(agentof.ServicePort) string) warning {
	var parts []string
	for _, p := range taken {
		parts = append(parts, fmt.Sprintf("%s (realized for Service %s)", agentof.ServicePort{IP: p.IP, Protocol: p.Protocol, Port: p.Port}, owner(p)))
	}
	sort.Strings(parts)
	return warning{ReasonPortConflict, fmt.Sprintf("%s not realized: another Service has the same address and port; this one gets it once that one lets go", strings.Join(parts, ", "))}
}

// warn posts a Warning Event for each warning not yet posted for this
// generation of the Service (a resync posts nothing again; an update of the
// Service's spec posts what still holds). Without a recorder it only logs.
func (p *Proxy) warn(key string, svc *corev1.Service, ws []warning) {
	p.mu.Lock()
	w := p.warned[key]
	if w == nil || w.uid != svc.UID || w.generation != svc.Generation {
		w = &warned{uid: svc.UID, generation: svc.Generation, posted: map[warning]bool{}}
		p.warned[key] = w
	}
	var fresh []warning
	for _, x := range ws {
		if !w.posted[x] {
			w.posted[x] = true
			fresh = append(fresh, x)
		}
	}
	p.mu.Unlock()
	for _, x := range fresh {
		klog.InfoS("Service not wholly realized", "service", key, "generation", svc.Generation, "reason", x.reason, "message", x.message)
		if p.recorder != nil {
			// The generation in the message keeps every Event of this
			// process distinct: the recorder never aggregates one into an
			// earlier Event (a patch, which the agent may not do).
			p.recorder.Eventf(svc, corev1.EventTypeWarning, x.reason, "%s (Service generation %d)", x.message, svc.Generation)
		}
	}
}

// forgetWarnings drops the record of a deleted Service.
func (p *Proxy) forgetWarnings(key string) {
	p.mu.Lock()
	delete(p.warned, key)
	p.mu.Unlock()
}
