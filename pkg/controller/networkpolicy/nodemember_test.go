package networkpolicy

import (
	"net"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Node selected by a nodeSelector peer stands for upstream's addresses of
// it (upstream's k8s.GetNodeAllAddrs): per IP family the first InternalIP,
// else the first ExternalIP; the Antrea gateway, first address of each
// podCIDR; the node.antrea.io/transport-addresses annotation.
func TestNodeMemberHasUpstreamsNodeAddresses(t *testing.T) {
	addr := func(t v1.NodeAddressType, a string) v1.NodeAddress { return v1.NodeAddress{Type: t, Address: a} }
	for _, tc := range []struct {
		name string
		node v1.Node
		want []string
	}{
		{"the InternalIP, not the ExternalIP, and the gateway of the podCIDR", v1.Node{
			Spec:   v1.NodeSpec{PodCIDR: "10.10.1.0/24", PodCIDRs: []string{"10.10.1.0/24"}},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{addr(v1.NodeHostName, "n1"), addr(v1.NodeExternalIP, "192.0.2.7"), addr(v1.NodeInternalIP, "172.18.0.2")}},
		}, []string{"10.10.1.1", "172.18.0.2"}},
		{"the first InternalIP of each family", v1.Node{
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{addr(v1.NodeInternalIP, "172.18.0.2"), addr(v1.NodeInternalIP, "172.18.0.3"), addr(v1.NodeInternalIP, "fd00::2")}},
		}, []string{"172.18.0.2", "fd00::2"}},
		{"the ExternalIP without an InternalIP; podCIDR when podCIDRs is unset", v1.Node{
			Spec:   v1.NodeSpec{PodCIDR: "10.10.2.0/24"},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{addr(v1.NodeExternalIP, "192.0.2.7")}},
		}, []string{"10.10.2.1", "192.0.2.7"}},
		{"the transport addresses of the annotation, each once", v1.Node{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NodeTransportAddressAnnotation: "172.19.0.2,172.18.0.2"}},
			Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{addr(v1.NodeInternalIP, "172.18.0.2")}},
		}, []string{"172.18.0.2", "172.19.0.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.node.Name = "n1"
			m := nodeMember(&tc.node)
			var got []string
			for _, ip := range m.IPs {
				got = append(got, net.IP(ip).String())
			}
			if m.Node == nil || m.Node.Name != "n1" || !slices.Equal(got, tc.want) {
				t.Errorf("member %v with IPs %v, want node n1 with %v", m.Node, got, tc.want)
			}
		})
	}
}
