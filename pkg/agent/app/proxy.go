package app

import (
	"context"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/proxy"
	"antrea.io/antrea/pkg/agent/route"
)

// setupNodePath sets up AntreaProxy's node path with proxyAll (NodePorts,
// and Services for the node's own and outside traffic). Without proxyAll,
// nothing of an earlier run's node path stays.
func setupNodePath(ctx context.Context, d *deps) (component, error) {
	o, nc := d.o, d.nc
	if !o.EnableProxy || !o.ProxyAll {
		if err := route.RemoveNodePath(ctx, nc.Gateway.Name); err != nil {
			klog.ErrorS(err, "Cannot remove the node path of an earlier run")
		}
		return nil, nil
	}
	cfg := route.NodePathConfig{GatewayName: nc.Gateway.Name, GatewayIP: addrOf(d.gatewayIP),
		NodeIP: addrOf(nc.NodeIP.IP), PodCIDR: d.localPodPrefix(), NodePortAddresses: o.NodePortAddresses,
		// A dual-stack node: the node path serves IPv6 too (docs/ipv6.md).
		GatewayIPv6: addrOfEither(d.gatewayIPv6), PodCIDRv6: d.localPodPrefixV6(), NodeIPv6: d.nodeIPv6()}
	if d.ipv6Only() {
		// An IPv6-only node: the node path serves IPv6 alone.
		cfg = route.NodePathConfig{GatewayName: nc.Gateway.Name, NodePortAddresses: o.NodePortAddresses,
			GatewayIPv6: addrOfEither(d.gatewayIP), PodCIDRv6: prefixOf(d.podCIDRs[0]), NodeIPv6: addrOfEither(nc.NodeIP.IP)}
	}
	np, err := route.NewNodePath(cfg)
	if err != nil {
		return nil, err
	}
	d.nodePath = np
	return runFunc(np.Run), nil
}

// setupProxyHealth serves kube-proxy's health port in its place with
// proxyAll (no kube-proxy runs).
func setupProxyHealth(_ context.Context, d *deps) (component, error) {
	if !d.o.EnableProxy || !d.o.ProxyAll {
		return nil, nil
	}
	hs, c := proxyHealthz(d.o, d.informers)
	d.proxyHealth = hs
	return c, nil
}

// proxyHealthz is kube-proxy's health server at
// antreaProxy.healthzBindAddress, judging the node from f's informer, and
// the component serving it, which restarts the server 5 s after it fails
// (kube-proxy's own rule); nil and nil when the key is "".
func proxyHealthz(o Options, f informers.SharedInformerFactory) (*proxy.ProxyHealthServer, component) {
	if !o.ProxyHealthzAddress.IsValid() {
		return nil, nil
	}
	nodes := f.Core().V1().Nodes().Lister()
	hs := proxy.NewProxyHealthServer(proxy.DefaultProxyHealthTimeout, func() *corev1.Node {
		n, err := nodes.Get(o.NodeName)
		if err != nil {
			return nil
		}
		return n
	}, nil)
	return hs, loop(func(ctx context.Context) {
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			if err := hs.Serve(ctx, o.ProxyHealthzAddress); err != nil {
				klog.ErrorS(err, "kube-proxy's health server failed; restarting it in 5 s")
			}
		}, 5*time.Second)
	})
}

// setupProxy runs AntreaProxy (pkg/agent/proxy): Services realized in OVS,
// with the node path and the health port of proxyAll.
func setupProxy(ctx context.Context, d *deps) (component, error) {
	o := d.o
	if !o.EnableProxy {
		return nil, nil
	}
	// Warning Events on Services the data path cannot wholly realize
	// (SCTP, IPv6), as antrea-agent on this node.
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	pcfg := proxy.Config{NodeName: o.NodeName, Packets: d.packets, DatapathType: o.DatapathType, ServiceProxyName: o.ServiceProxyName,
		Recorder: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: o.NodeName}),
		Nodes:    d.informers.Core().V1().Nodes(), Zone: d.node.Labels[corev1.LabelTopologyZone],
		// The health checks of externalTrafficPolicy Local belong to
		// whoever serves NodePorts: without proxyAll, kube-proxy does.
		NoHealthChecks: !o.ProxyAll, HealthCheckAddresses: healthCheckAddresses(o.NodePortAddresses),
		// A dual-stack node realizes the IPv6 ClusterIPs in the bridge
		// too, an IPv6-only node them alone.
		IPv6: d.gatewayIPv6 != nil || d.ipv6Only()}
	if o.ProxyAll {
		pcfg.ProxyAll, pcfg.NodePath, pcfg.ProxyHealth = true, d.nodePath, d.proxyHealth
	}
	services, err := proxy.NewWithConfig(pcfg,
		d.informers.Core().V1().Services(), d.informers.Discovery().V1().EndpointSlices(), d.flows)
	if err != nil {
		events.Shutdown()
		return nil, err
	}
	return runFunc(func(ctx context.Context) error {
		defer events.Shutdown()
		return services.Run(ctx)
	}), nil
}

// healthCheckAddresses are the node's IPv4 addresses within the
// nodePortAddresses prefixes, read once at start as kube-proxy does for its
// health checks; none (every address) when no prefix is given or none
// matches.
func healthCheckAddresses(prefixes []netip.Prefix) []netip.Addr {
	if len(prefixes) == 0 {
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		klog.ErrorS(err, "Cannot read the node's addresses; health checks are served on all of them")
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := addrOf(n.IP)
		for _, p := range prefixes {
			if ip.IsValid() && p.Contains(ip) {
				out = append(out, ip)
				break
			}
		}
	}
	if len(out) == 0 {
		klog.InfoS("No node address within nodePortAddresses; health checks are served on all of them", "nodePortAddresses", prefixes)
	}
	return out
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}

// addrOfEither is ip as a netip.Addr of its family (addrOf takes IPv4
// alone), the zero Addr for nil.
func addrOfEither(ip net.IP) netip.Addr {
	if ip.To4() != nil {
		return addrOf(ip)
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// prefixOf is n as a netip.Prefix of its family: an IPv4 network (even in
// net.IP's 16-byte form) is 4 bytes, an IPv6 one 16.
func prefixOf(n *net.IPNet) netip.Prefix {
	ones, _ := n.Mask.Size()
	a, _ := netip.AddrFromSlice(n.IP)
	return netip.PrefixFrom(a.Unmap(), ones).Masked()
}
