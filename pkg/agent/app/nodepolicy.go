package app

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// nodePolicyWriter writes the Node policy rules after the traffic that is
// always allowed (nodenet.NodePolicyAlways).
type nodePolicyWriter struct {
	np     *nodenet.NodePolicy
	always nodenet.NodePolicyAlways
}

func (w *nodePolicyWriter) SetNodePolicy(ctx context.Context, rules []nodenet.NodePolicyRule) error {
	return w.np.Set(ctx, w.always, rules)
}

// setupNodePolicyWriter returns what realizes the policies applied to this
// Node (the NodeNetworkPolicy gate); with the gate off it removes what an
// earlier run wrote and returns nil.
func setupNodePolicyWriter(ctx context.Context, d *deps) npcontroller.NodePolicyWriter {
	if d.nodeNet == nil {
		return nil
	}
	np := d.nodeNet.NodePolicy()
	if !d.o.FeatureGates[agentconfig.NodeNetworkPolicy] {
		if err := np.Remove(ctx); err != nil {
			klog.ErrorS(err, "Cannot remove the Node policy chains of an earlier run")
		}
		return nil
	}
	always := nodePolicyAlways(ctx, d)
	klog.InfoS("Node policies are realized in the node's netfilter; always allowed", "apiServers", always.APIServers,
		"tunnelProtocol", always.TunnelProtocol, "tunnelPort", always.TunnelPort, "gateway", always.Gateway, "podCIDRs", always.PodCIDRs)
	return &nodePolicyWriter{np: np, always: always}
}

// nodePolicyAlways is the traffic no Node policy may cut: the API server
// the agent reaches (its kubeconfig's or kubeAPIServerOverride's address,
// and the endpoints of Service default/kubernetes), the tunnel between
// nodes (in encap and hybrid modes), and the node to its own pods.
func nodePolicyAlways(ctx context.Context, d *deps) nodenet.NodePolicyAlways {
	var a nodenet.NodePolicyAlways
	seen := map[netip.Addr]bool{}
	add := func(ip netip.Addr) {
		if ip.IsValid() && !seen[ip.Unmap()] {
			seen[ip.Unmap()] = true
			a.APIServers = append(a.APIServers, ip.Unmap())
		}
	}
	if d.kubeConfig != nil {
		if u, err := url.Parse(d.kubeConfig.Host); err == nil && u.Hostname() != "" {
			if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
				add(ip)
			} else if ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname()); err == nil {
				for _, ip := range ips {
					add(ip)
				}
			}
		}
	}
	if d.kube != nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		slices, err := d.kube.DiscoveryV1().EndpointSlices("default").List(ctx,
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
		if err != nil {
			klog.ErrorS(err, "Cannot read the endpoints of Service default/kubernetes; the API server is allowed by its address only")
		} else {
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					for _, addr := range e.Addresses {
						ip, _ := netip.ParseAddr(addr)
						add(ip)
					}
				}
			}
		}
	}
	if d.o.TrafficEncryptionMode == agentconfig.EncryptionModeWireGuard {
		// The peers' WireGuard datagrams carry the pod traffic.
		a.TunnelProtocol, a.TunnelPort = types.ProtocolUDP, uint16(d.o.WireGuardPort)
	} else if d.o.TrafficEncapMode != agentconfig.EncapModeNoEncap {
		switch ovsconfig.TunnelType(d.o.TunnelType) {
		case ovsconfig.GeneveTunnel:
			a.TunnelProtocol, a.TunnelPort = types.ProtocolUDP, 6081
		case ovsconfig.VXLANTunnel:
			a.TunnelProtocol, a.TunnelPort = types.ProtocolUDP, 4789
		case ovsconfig.GRETunnel:
			a.TunnelProtocol = 47
		}
	}
	if d.nc != nil {
		a.Gateway = d.nc.Gateway.Name
	}
	for _, c := range d.podCIDRs {
		a.PodCIDRs = append(a.PodCIDRs, prefixOf(c))
	}
	return a
}
