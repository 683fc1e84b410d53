package proxy

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// nodeView is what the desired state of a Service depends on about this
// node: its name (endpoints on it are local; node hints), its zone (the
// topology.kubernetes.io/zone label of its Node object; zone hints) and
// whether the proxy realizes the node path.
type nodeView struct {
	name, zone string
	proxyAll   bool
	// ipv6: the node carries IPv6 (dual-stack), Config.IPv6.
	ipv6 bool
}

// families are the families whose ClusterIPs the bridge realizes here:
// those realizes accepts, and IPv6 on a dual-stack node.
func (n nodeView) families() []agenttypes.IPFamily {
	return agenttypes.Families(func(f agenttypes.IPFamily) bool {
		return realizes(f) || (f == agenttypes.IPv6 && n.ipv6)
	})
}

// addrs keeps the addresses of the node's families (families), in order:
// what the node path routes to the gateway (an IPv6 ClusterIP on a
// dual-stack node too, where the node path serves IPv6).
func (n nodeView) addrs(as []netip.Addr) []netip.Addr {
	fams := n.families()
	var out []netip.Addr
	for _, a := range as {
		if slices.Contains(fams, agenttypes.FamilyOf(a)) {
			out = append(out, a)
		}
	}
	return out
}

// Topology modes (kube-proxy's pkg/proxy/topology.go): which hints narrow
// the cluster endpoints.
const (
	topologyNone     = ""
	topologySameNode = corev1.ServiceTrafficDistributionPreferSameNode
	topologySameZone = corev1.ServiceTrafficDistributionPreferSameZone
)

// topologyMode decides, as kube-proxy does, whether hints apply: the
// EndpointSlice controller writes them for trafficDistribution
// PreferSameNode (forNodes), PreferSameZone or PreferClose (forZones), and
// for the topology-aware-routing annotation (forZones); kube-proxy reads
// only the hints, not the Service's field. Node hints apply when every
// ready endpoint has one and one is for this node; else zone hints, when
// every ready endpoint has one and one is for this node's zone (a node
// without a zone label has none); else none: every ready endpoint serves.
// A hint that names no ready endpoint here so never leaves a node without
// endpoints.
func (cs candidates) topologyMode(node nodeView) string {
	hasReady, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, c := range cs {
		if !c.ready {
			continue
		}
		hasReady = true
		if len(c.forNodes) == 0 {
			allNode = false
		} else if slices.Contains(c.forNodes, node.name) {
			forNode = true
		}
		if len(c.forZones) == 0 {
			allZone = false
		} else if node.zone != "" && slices.Contains(c.forZones, node.zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func (c candidate) availableFor(mode string, node nodeView) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(c.forNodes, node.name)
	case topologySameZone:
		return slices.Contains(c.forZones, node.zone)
	}
	return true
}

// followNodeZone keeps the zone of this node's Node object: when its
// topology.kubernetes.io/zone label changes, every Service is synced again
// (those whose endpoints carry zone hints may change; the others write
// nothing).
func (p *Proxy) followNodeZone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok || n.Name != p.nodeName {
		return
	}
	zone := n.Labels[corev1.LabelTopologyZone]
	p.mu.Lock()
	changed := zone != p.zone
	p.zone = zone
	p.mu.Unlock()
	if !changed {
		return
	}
	klog.InfoS("This node's zone changed; syncing every Service again", "node", p.nodeName, "zone", zone)
	services, err := p.services.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list Services")
		return
	}
	for _, svc := range services {
		p.queue.Add(svc.Namespace + "/" + svc.Name)
	}
}

// view is this node as Services' desired states see it now.
func (p *Proxy) view() nodeView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nodeView{name: p.nodeName, zone: p.zone, proxyAll: p.proxyAll, ipv6: p.ipv6}
}
