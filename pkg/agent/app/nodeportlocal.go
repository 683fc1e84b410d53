package app

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodeportlocal"
)

// setupNodePortLocal runs NodePortLocal (pkg/agent/nodeportlocal) when its
// gate and nodePortLocal.enable are on: this node's backend Pods of
// annotated Services get node ports, DNATed by the node's netfilter table.
// Off, the feature's chains of an earlier run are removed.
func setupNodePortLocal(ctx context.Context, d *deps) (component, error) {
	if d.o.NodePortLocal == nil {
		// Stale rules are no reason to stop the agent: logged.
		if err := d.nodeNet.RemoveNodePortLocal(ctx); err != nil {
			klog.ErrorS(err, "Cannot remove the NodePortLocal rules of an earlier run")
		}
		return nil, nil
	}
	// This node's Pods only, as upstream's.
	pods := informers.NewSharedInformerFactoryWithOptions(d.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", d.o.NodeName).String()
		}))
	services := d.informers.Core().V1().Services()
	ctrl := nodeportlocal.NewController(nodeportlocal.Config{NodeName: d.o.NodeName, Client: d.kube,
		Pods: pods.Core().V1().Pods().Informer(), Services: services.Informer(), Rules: d.nodeNet,
		Gateway: d.nc.Gateway.Name, NodeIPs: nodeAddrs(d), Range: *d.o.NodePortLocal})
	pods.Start(ctx.Done())
	d.informers.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		ctrl.Run(ctx)
		pods.Shutdown()
	}), nil
}

// nodeAddrs are the Node's InternalIPs, one per family (the transport
// address found at start when the Node has none).
func nodeAddrs(d *deps) []netip.Addr {
	var out []netip.Addr
	seen := map[bool]bool{}
	if d.node != nil {
		for _, a := range d.node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && !seen[ip.Is6()] {
				seen[ip.Is6()] = true
				out = append(out, ip)
			}
		}
	}
	if d.nc != nil && d.nc.NodeIP != nil {
		if ip, ok := netip.AddrFromSlice(d.nc.NodeIP.IP); ok && !seen[ip.Unmap().Is6()] {
			out = append(out, ip.Unmap())
		}
	}
	return out
}
