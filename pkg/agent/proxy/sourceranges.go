package proxy

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// sourceRanges are the Service's spec.loadBalancerSourceRanges on each of
// its ports on a LoadBalancer ingress IP that want realizes, as kube-proxy
// reads them: only clients in the ranges may open connections through the
// ingress IPs (its ClusterIPs, external IPs and NodePorts stay open);
// entries are trimmed of spaces (the API validation lets padding through);
// an entry that is no CIDR (kube-apiserver validates them, but an object
// may predate that) is skipped with a log, never fatal. Nil when the
// Service has no range or no such port: every client may connect. The data
// path keeps each port's ranges of its address's family, and reads a
// zero-length prefix as everyone (pkg/agent/openflow, SourceRanges).
func sourceRanges(svc *corev1.Service, want agentof.ServiceState) agentof.SourceRanges {
	if len(svc.Spec.LoadBalancerSourceRanges) == 0 {
		return nil
	}
	var ranges []netip.Prefix
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		r, err := netip.ParsePrefix(s)
		if err != nil {
			klog.InfoS("Skipping an invalid loadBalancerSourceRanges entry", "service", klog.KObj(svc), "range", s, "err", err)
			continue
		}
		ranges = append(ranges, r.Masked())
	}
	if len(ranges) == 0 {
		return nil
	}
	var out agentof.SourceRanges
	for _, ip := range loadBalancerIPs(svc) {
		for _, sp := range svc.Spec.Ports {
			proto, ok := protocolNumber(sp.Protocol)
			if !ok {
				continue
			}
			port := agentof.ServicePort{IP: ip, Protocol: proto, Port: uint16(sp.Port)}
			if _, ok := want[port]; !ok {
				continue
			}
			if out == nil {
				out = agentof.SourceRanges{}
			}
			out[port] = ranges
		}
	}
	return out
}
