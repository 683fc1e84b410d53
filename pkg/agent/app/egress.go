package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/egress"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupEgress runs Egress (pkg/agent/egress, the Egress gate): this node's
// memberlist member on its transport address, and the controller that holds
// the Egress IPs the membership gives this node, SNATs their pods' traffic
// and tunnels its own pods' traffic to the holders of their Egress IPs.
func setupEgress(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.Egress] {
		return nil, nil
	}
	nodeIP := d.nc.NodeIP.IP
	link, err := linkWithAddress(nodeIP)
	if err != nil {
		return nil, err
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	egresses, pools := f.Crd().V1beta1().Egresses(), f.Crd().V1beta1().ExternalIPPools()
	nodes := d.informers.Core().V1().Nodes()
	var podCIDRs []netip.Prefix
	for _, c := range d.podCIDRs {
		podCIDRs = append(podCIDRs, prefixOf(c))
	}
	ctrl := egress.NewController(egress.Config{NodeName: d.o.NodeName, PodCIDRs: podCIDRs, Gateway: d.nc.Gateway.Name,
		Routed: d.o.TrafficEncapMode == agentconfig.EncapModeNoEncap, Client: crd,
		Egresses: egresses.Lister(), Pools: pools.Lister(), Nodes: nodes.Lister(),
		Informers: []cache.SharedIndexInformer{egresses.Informer(), pools.Informer(), nodes.Informer()},
		Flows:     d.flows, SNAT: d.nodeNet, IPs: egress.NewIPAssigner(link)})
	cluster, err := egress.NewCluster(egress.ClusterConfig{NodeName: d.o.NodeName, BindIP: nodeIP, Port: d.o.ClusterPort,
		OnChange: ctrl.MembershipChanged})
	if err != nil {
		return nil, err
	}
	ctrl.UseCluster(cluster)
	f.Start(ctx.Done())
	d.informers.Start(ctx.Done()) // the Node informer, if no part before registered it
	return loop(func(ctx context.Context) {
		// The first join completes before the first sync: a member alone
		// would take every IP for itself (an agent restarting would pull
		// the IPs away from their holders and back).
		joinCluster(ctx, cluster, nodes.Informer().HasSynced, func() []string {
			var addrs []string
			ns, _ := nodes.Lister().List(labels.Everything())
			for _, n := range ns {
				if n.Name == d.o.NodeName || cluster.IsAlive(n.Name) {
					continue
				}
				for _, a := range n.Status.Addresses {
					if a.Type == "InternalIP" {
						addrs = append(addrs, net.JoinHostPort(a.Address, fmt.Sprint(clusterPort(d.o.ClusterPort))))
					}
				}
			}
			return addrs
		})
		ctrl.Run(ctx)
		// Leaving tells the others at once: they take this node's IPs
		// without waiting for the failure detection.
		cluster.Leave(2 * time.Second)
		f.Shutdown()
	}), nil
}

func clusterPort(p int) int {
	if p == 0 {
		return egress.MemberlistPort
	}
	return p
}

// joinCluster joins the members of the other nodes once the Node informer
// synced, then returns; in the background it joins again every 10 s those
// not alive (a node that came up later joins by itself; one that was cut
// off and came back may not know us).
func joinCluster(ctx context.Context, c *egress.Cluster, synced func() bool, others func() []string) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	join := func() {
		if addrs := others(); len(addrs) > 0 {
			n, err := c.Join(addrs)
			if err != nil {
				klog.V(2).InfoS("Memberlist join incomplete", "joined", n, "of", len(addrs), "err", err)
			}
		}
	}
	join()
	klog.InfoS("Joined the Egress memberlist cluster", "alive", c.Alive())
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			join()
		}
	}()
}

// linkWithAddress is the interface that has ip: the node's transport
// interface (br-phy with the userspace datapath).
func linkWithAddress(ip net.IP) (string, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", fmt.Errorf("link of %s: %w", ip, err)
			}
			return l.Attrs().Name, nil
		}
	}
	return "", fmt.Errorf("no interface has the node's address %s", ip)
}
