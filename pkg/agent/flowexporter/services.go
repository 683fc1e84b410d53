package flowexporter

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// clusterIPIndex indexes Services by each of their ClusterIPs.
const clusterIPIndex = "flowexporter.clusterIP"

// ServiceIndex is ServiceLookup on the Service informer AntreaProxy reads
// (the agent's shared one): the Service port a connection dialled at a
// ClusterIP, named as upstream names it, "namespace/name:port".
type ServiceIndex struct{ indexer cache.Indexer }

// NewServiceIndex adds its index to inf, which must not have started.
func NewServiceIndex(inf cache.SharedIndexInformer) (*ServiceIndex, error) {
	err := inf.AddIndexers(cache.Indexers{clusterIPIndex: func(obj any) ([]string, error) {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return nil, nil
		}
		var ips []string
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				ips = append(ips, a.String())
			}
		}
		return ips, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("index Services by ClusterIP: %w", err)
	}
	return &ServiceIndex{indexer: inf.GetIndexer()}, nil
}

var protocolNames = map[uint8]corev1.Protocol{6: corev1.ProtocolTCP, 17: corev1.ProtocolUDP, 132: corev1.ProtocolSCTP}

// ServicePortName implements ServiceLookup.
func (s *ServiceIndex) ServicePortName(ip netip.Addr, port uint16, proto uint8) (string, bool) {
	objs, err := s.indexer.ByIndex(clusterIPIndex, ip.Unmap().String())
	if err != nil {
		return "", false
	}
	for _, o := range objs {
		svc := o.(*corev1.Service)
		for _, p := range svc.Spec.Ports {
			if p.Port == int32(port) && p.Protocol == protocolNames[proto] {
				return fmt.Sprintf("%s/%s:%s", svc.Namespace, svc.Name, p.Name), true
			}
		}
	}
	return "", false
}
