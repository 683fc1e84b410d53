package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/egress"
	"antrea.io/antrea/pkg/agent/nodeinit"
	"antrea.io/antrea/pkg/agent/serviceexternalip"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupMemberlist runs this node's member of the agents' memberlist
// cluster (pkg/agent/egress.Cluster) on its transport address when a
// feature that places external IPs on nodes is on (Egress,
// ServiceExternalIP): those features
// decide from the membership which node holds each IP.
func setupMemberlist(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.Egress] && !serviceExternalIPOn(d.o) {
		return nil, nil
	}
	cluster, err := egress.NewCluster(egress.ClusterConfig{NodeName: d.o.NodeName, BindIP: d.nc.NodeIP.IP, Port: d.o.ClusterPort})
	if err != nil {
		return nil, err
	}
	nodes := d.informers.Core().V1().Nodes()
	d.informers.Start(ctx.Done()) // the Node informer, if no part before registered it
	d.cluster = cluster
	others := func() []string {
		var addrs []string
		ns, _ := nodes.Lister().List(labels.Everything())
		rand.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
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
	}
	return loop(func(ctx context.Context) {
		joinCluster(ctx, cluster, nodes.Informer().HasSynced, others)
		// Leaving tells the others at once: they take this node's IPs
		// without waiting for the failure detection.
		cluster.Leave(2 * time.Second)
	}), nil
}

// setupEgress runs Egress (pkg/agent/egress, the Egress gate): the
// controller that holds the Egress IPs the membership gives this node,
// SNATs their pods' traffic and tunnels its own pods' traffic to the
// holders of their Egress IPs.
func setupEgress(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.Egress] {
		return nil, nil
	}
	link, crd, f, err := externalIPClients(d)
	if err != nil {
		return nil, err
	}
	egresses, pools := f.Crd().V1beta1().Egresses(), f.Crd().V1beta1().ExternalIPPools()
	nodes := d.informers.Core().V1().Nodes()
	var podCIDRs []netip.Prefix
	for _, c := range d.podCIDRs {
		podCIDRs = append(podCIDRs, prefixOf(c))
	}
	var vlans egress.VLANLinks
	if d.o.DatapathType == agentconfig.DatapathNetdev {
		vlans = egress.NewOVSVLANLinks(d.ovsdb, nodeinit.DefaultUplinkBridgeName)
	}
	ips := egress.NewIPAssigner(link, vlans)
	ctrl := egress.NewController(egress.Config{NodeName: d.o.NodeName, PodCIDRs: podCIDRs, Gateway: d.nc.Gateway.Name,
		Routed: routedPeers(d.o.TrafficEncapMode), Client: crd, Controlplane: d.controlplane,
		Egresses: egresses.Lister(), Pools: pools.Lister(), Nodes: nodes.Lister(),
		Informers: []cache.SharedIndexInformer{egresses.Informer(), pools.Informer(), nodes.Informer()},
		Flows:     d.flows, SNAT: d.nodeNet, IPs: ips, Routes: egress.SubnetRouter{}, IsLocal: ips.IsLocalUnheld, Cluster: d.cluster,
		TrafficShaping: d.o.FeatureGates[agentconfig.EgressTrafficShaping]})
	d.cluster.AddListener(ctrl.MembershipChanged)
	d.egress = ctrl
	f.Start(ctx.Done())
	d.informers.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		ctrl.Run(ctx)
		f.Shutdown()
	}), nil
}

func clusterPort(p int) int {
	if p == 0 {
		return egress.MemberlistPort
	}
	return p
}

// joinCluster joins the cluster through any other node's member once the
// Node informer synced and marks the first join done (the features then
// decide), then every 10 s joins the nodes not alive (a node that came up
// later joins by itself; one that was cut off and came back may not know
// this one), until ctx ends.
func joinCluster(ctx context.Context, c *egress.Cluster, synced func() bool, others func() []string) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	ok := c.JoinAny(others())
	c.MarkJoined()
	klog.InfoS("Joined the agents' memberlist cluster", "reachedAMember", ok, "alive", c.Alive())
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		if addrs := others(); len(addrs) > 0 {
			c.JoinAny(addrs)
		}
	}
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

// externalIPClients are what a part placing external IPs needs: the
// interface with the node's address (where they are answered for), a client
// of Antrea's APIs and an informer factory of its own.
func externalIPClients(d *deps) (string, versioned.Interface, crdinformers.SharedInformerFactory, error) {
	link, err := linkWithAddress(d.nc.NodeIP.IP)
	if err != nil {
		return "", nil, nil, err
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return "", nil, nil, err
	}
	return link, crd, crdinformers.NewSharedInformerFactory(crd, 0), nil
}

// serviceExternalIPOn says whether this agent answers for LoadBalancer IPs:
// the gate, and AntreaProxy's node path (proxyAll), which routes them into
// OVS.
func serviceExternalIPOn(o Options) bool {
	return o.FeatureGates[agentconfig.ServiceExternalIP] && o.EnableProxy && o.ProxyAll
}

// setupServiceExternalIP runs the agent's side of ServiceExternalIP
// (pkg/agent/serviceexternalip): this node answers ARP for the
// LoadBalancer IPs the membership gives it.
func setupServiceExternalIP(ctx context.Context, d *deps) (component, error) {
	if !serviceExternalIPOn(d.o) {
		return nil, nil
	}
	link, _, f, err := externalIPClients(d)
	if err != nil {
		return nil, err
	}
	pools := f.Crd().V1beta1().ExternalIPPools()
	services, nodes := d.informers.Core().V1().Services(), d.informers.Core().V1().Nodes()
	slices := d.informers.Discovery().V1().EndpointSlices()
	ctrl := serviceexternalip.NewController(serviceexternalip.Config{NodeName: d.o.NodeName,
		Services: services.Lister(), EndpointSlices: slices.Lister(), Pools: pools.Lister(), Nodes: nodes.Lister(),
		Informers: []cache.SharedIndexInformer{services.Informer(), slices.Informer(), pools.Informer(), nodes.Informer()},
		Neighbors: serviceexternalip.NewProxyNeighbors(link), Cluster: d.cluster})
	d.cluster.AddListener(ctrl.MembershipChanged)
	f.Start(ctx.Done())
	d.informers.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		ctrl.Run(ctx)
		f.Shutdown()
	}), nil
}
