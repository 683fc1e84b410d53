// Package app runs antrea-agent: it brings up the node's OVS (bridge, gateway,
// tunnel, underlay), lays out the OpenFlow pipeline and installs the node's
// flows, rebuilds the interface store from OVSDB and replays the flows of
// existing pods, keeps routes to the other nodes, realizes Services (AntreaProxy,
// pkg/agent/proxy) and serves the CNI. Order matters: the CNI is served (and
// reports ready) only once the pipeline is in place, and flows of an earlier
// run are removed only after this run's flows replaced them, so a restart
// never leaves a window without flows (Service groups excepted: the proxy
// replaces them once its caches synced, see proxy.Run).
package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver"
	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/dpcache"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	"antrea.io/antrea/pkg/agent/nodeinit"
	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/proxy"
	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/agent/stats"
	"antrea.io/antrea/pkg/agent/traceflow"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/config"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// flowRoundKey is the bridge external_id holding the cookie round of the
// flows installed by the last agent run.
const flowRoundKey = "antrea.io/flow-round"

// waitForNode waits until the Node has a pod CIDR (kube-controller-manager
// allocates it after the node registers).
func waitForNode(ctx context.Context, c kubernetes.Interface, name string) (*corev1.Node, []*net.IPNet, error) {
	var node *corev1.Node
	var cidrs []*net.IPNet
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			klog.InfoS("Waiting for Node", "node", name, "err", err)
			return false, nil
		}
		specs := n.Spec.PodCIDRs
		if len(specs) == 0 && n.Spec.PodCIDR != "" {
			specs = []string{n.Spec.PodCIDR}
		}
		if len(specs) == 0 {
			klog.InfoS("Waiting for the Node's pod CIDR", "node", name)
			return false, nil
		}
		cidrs = cidrs[:0]
		for _, s := range specs {
			_, c, err := net.ParseCIDR(s)
			if err != nil {
				return false, fmt.Errorf("node %s: podCIDR %q: %w", name, s, err)
			}
			cidrs = append(cidrs, c)
		}
		node = n
		return true, nil
	})
	return node, cidrs, err
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	kubeConfig, err := config.KubeRESTConfig(o.Kubeconfig, o.KubeAPIServerOverride, "antrea-agent")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	ovsdb, err := connectOVSDB(ctx, "unix:"+filepath.Join(o.OVSRunDir, "db.sock"))
	if err != nil {
		return err
	}
	defer ovsdb.Close()
	if err := prepareNodeNetwork(ctx, ovsdb, o.OVSRunDir, nodeinit.DefaultUplinkBridgeName); err != nil {
		return err
	}
	node, podCIDRs, err := waitForNode(ctx, client, o.NodeName)
	if err != nil {
		return err
	}
	uplink, nodeIP := o.UplinkName, net.IP(nil)
	if uplink == "" {
		if uplink, nodeIP, err = findTransportInterface(ctx, node, ovsdb); err != nil {
			return err
		}
		klog.InfoS("Found the transport interface", "node", o.NodeName, "interface", uplink, "nodeIP", nodeIP)
	}
	nc, err := nodeinit.Bringup(ctx, nodeinit.Config{
		NodeName:     o.NodeName,
		Conn:         ovsdb,
		OVSRunDir:    o.OVSRunDir,
		DatapathType: ovsconfig.OVSDatapathType(o.DatapathType),
		TunnelType:   ovsconfig.TunnelType(o.TunnelType),
		TunnelCSum:   o.TunnelCsum,
		NodeIP:       nodeIP,
		PodCIDRs:     podCIDRs,
		UplinkName:   uplink,
		MTU:          o.MTU,
		BridgeName:   o.OVSBridge,
		GatewayName:  o.HostGateway,
	})
	if err != nil {
		return fmt.Errorf("bring up node %s: %w", o.NodeName, err)
	}
	bridge := ovsconfig.NewOVSBridge(ovsdb, ovsconfig.BridgeConfig{Name: nc.BridgeName, DatapathType: nc.DatapathType})

	// Flow round: this run's flows replace the previous run's in place; what
	// the previous run had and this one does not want is deleted afterwards.
	ids, err := bridge.GetExternalIDs(ctx)
	if err != nil {
		return err
	}
	prevRound, _ := strconv.ParseUint(ids[flowRoundKey], 10, 32)
	round := uint32(prevRound) + 1

	var flows *agentof.Client
	rs := &restore{ovsdb: ovsdb}
	repinNow := make(chan struct{}, 1)
	ofc := binding.NewClient(filepath.Join(o.OVSRunDir, nc.BridgeName+".mgmt"), binding.ClientOptions{
		// Packet-ins: AntreaProxy rejects connections to Services without
		// endpoints through them.
		Conn: binding.Options{AsyncMessages: true},
		OnConnect: func(ctx context.Context, conn *binding.Conn, reconnect bool) error {
			if reconnect {
				klog.InfoS("OpenFlow connection re-established; replaying flows", "bridge", nc.BridgeName)
				select { // the new ovs-vswitchd has no tunnel neighbour
				case repinNow <- struct{}{}:
				default:
				}
				if err := flows.Replay(ctx, conn); err != nil {
					return err
				}
				return rs.holdIfRestarted(ctx)
			}
			return nil
		},
	})
	// Flows are written through the flow-ops metrics (pkg/agent/metrics).
	if flows, err = agentof.NewClient(agentmetrics.Bridge{Client: ofc}, round); err != nil {
		return err
	}
	go ofc.Run(ctx)

	rs.flows = flows
	rs.underlay = func(ctx context.Context) error { return nc.RestoreUnderlay(ctx, ovsdb, o.OVSRunDir) }
	if err := rs.holdIfEmpty(ctx, ofc); err != nil {
		return err
	}
	gwIP := route.GatewayIP(podCIDRs[0])
	if err := flows.Initialize(ctx, &agentof.NodeConfig{
		GatewayOFPort: uint32(nc.Gateway.OFPort),
		GatewayIP:     gwIP,
		GatewayMAC:    nc.Gateway.MAC,
		TunnelOFPort:  uint32(nc.TunnelOFPort),
		PodCIDR:       podCIDRs[0],
		NodeIP:        nc.NodeIP.IP,
	}); err != nil {
		return err
	}

	// Rebuild the interface store from OVSDB and put back existing pods' flows.
	ports, err := bridge.GetPortList(ctx)
	if err != nil {
		return err
	}
	store := interfacestore.NewInterfaceStore()
	store.Initialize(interfacestore.InterfaceConfigsFromOVSPorts(ports))
	for _, iface := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if iface.OVSPortConfig == nil || iface.OFPort <= 0 {
			continue
		}
		if err := flows.InstallPodFlows(iface.InterfaceName, iface.IPs, iface.MAC, uint32(iface.OFPort)); err != nil {
			return fmt.Errorf("restore flows of pod %s/%s: %w", iface.PodNamespace, iface.PodName, err)
		}
	}
	klog.InfoS("Restored pod interfaces from OVSDB", "pods", store.GetContainerInterfaceNum())
	// The node's netfilter (pkg/agent/nodenet): the masquerade of pod
	// traffic leaving the node, and the pods' hostPorts.
	nodeNet, err := nodenet.New()
	if err != nil {
		return err
	}
	if err := nodeNet.Masquerade(ctx, prefixOf(podCIDRs[0]), nc.Gateway.Name); err != nil {
		return err
	}
	hostPorts := setupHostPorts(ctx, nodeNet, nc.Gateway.Name, store)

	// Datapath flow cache purges: after policy changes that narrow what is
	// allowed, after the br-int hold is lifted, and after a tunnel neighbour
	// is pinned (cached datapath flows carry the tunnel header with the
	// neighbour's MAC built in).
	purger := dpcache.New(dpcache.AppctlPurge(o.OVSRunDir))
	go purger.Run(ctx)
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	routes := route.NewController(o.NodeName, informerFactory.Core().V1().Nodes(), flows,
		&route.GatewayRoutes{GatewayName: nc.Gateway.Name, LocalPodCIDR: podCIDRs[0]},
		func(peer net.IP) { go pinTunnelNeighbor(ctx, o, nc, peer, purger.Changed) })
	go keepNeighborsPinned(ctx, neighborRepinInterval, repinNow, func() []net.IP {
		var ips []net.IP
		for _, r := range routes.Installed() {
			ips = append(ips, r.NodeIP)
		}
		return ips
	}, func(peer net.IP) {
		// No purge: the pin keeps the same MAC, and a restarted
		// ovs-vswitchd has no cached datapath flow.
		pinTunnelNeighbor(ctx, o, nc, peer, func() {})
	})
	if nc.Uplink.BridgeName != "" {
		isPeer := func(ip net.IP) bool {
			for _, r := range routes.Installed() {
				if r.NodeIP.Equal(ip) {
					return true
				}
			}
			return false
		}
		if err := followPeerNeighbors(ctx, nc.Uplink.BridgeName, isPeer, func(peer net.IP, mac net.HardwareAddr) {
			if err := nc.PinTunnelNeighbor(ctx, peer, mac); err != nil {
				klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer)
				return
			}
			purger.Changed()
		}); err != nil {
			// The periodic pin still corrects a peer's MAC change.
			klog.ErrorS(err, "Cannot follow the kernel's neighbour changes; a peer's new MAC is pinned within 10 minutes", "link", nc.Uplink.BridgeName)
		}
	}
	// Packet-ins go to the feature that asked for them: Service rejects to
	// AntreaProxy, policy rejects and audit logging to the policy controller.
	// Each registers its handler with the one dispatcher.
	packets := agentof.NewPacketInDispatcher(ofc)
	go packets.Run(ctx)
	proxyErr := make(chan error, 1)
	if o.EnableProxy {
		// Warning Events on Services the data path cannot wholly realize
		// (SCTP, IPv6), as antrea-agent on this node.
		events := record.NewBroadcaster(record.WithContext(ctx))
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		defer events.Shutdown()
		pcfg := proxy.Config{NodeName: o.NodeName, Packets: packets, DatapathType: o.DatapathType, ServiceProxyName: o.ServiceProxyName,
			Recorder: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: o.NodeName}),
			Nodes:    informerFactory.Core().V1().Nodes(), Zone: node.Labels[corev1.LabelTopologyZone],
			// The health checks of externalTrafficPolicy Local belong to
			// whoever serves NodePorts: without proxyAll, kube-proxy does.
			NoHealthChecks: !o.ProxyAll, HealthCheckAddresses: healthCheckAddresses(o.NodePortAddresses)}
		if o.ProxyAll {
			np, err := route.NewNodePath(route.NodePathConfig{GatewayName: nc.Gateway.Name, GatewayIP: addrOf(gwIP),
				NodeIP: addrOf(nc.NodeIP.IP), PodCIDR: prefixOf(podCIDRs[0]), NodePortAddresses: o.NodePortAddresses})
			if err != nil {
				return err
			}
			go func() { _ = np.Run(ctx) }()
			pcfg.ProxyAll, pcfg.NodePath = true, np
			pcfg.ProxyHealth = serveProxyHealthz(ctx, o, informerFactory)
		}
		services, err := proxy.NewWithConfig(pcfg,
			informerFactory.Core().V1().Services(), informerFactory.Discovery().V1().EndpointSlices(), flows)
		if err != nil {
			return err
		}
		go func() { proxyErr <- services.Run(ctx) }()
	}
	if !o.EnableProxy || !o.ProxyAll {
		// proxyAll off: nothing of an earlier run's node path stays.
		if err := route.RemoveNodePath(ctx, nc.Gateway.Name); err != nil {
			klog.ErrorS(err, "Cannot remove the node path of an earlier run")
		}
	}
	informerFactory.Start(ctx.Done())
	routeErr := make(chan error, 1)
	go func() { routeErr <- routes.Run(ctx) }()
	if !waitRoutesInstalled(ctx, routes, informerFactory, o.NodeName) {
		return ctx.Err()
	}

	cpClient, err := versioned.NewForConfig(kubeConfig)
	if err != nil {
		return err
	}
	// Policy flows of an earlier run stay in place (their cookie has no
	// round): the reconciler adopts them and writes only what changed.
	recovered, err := flows.RecoverPolicy(ctx)
	if err != nil {
		return err
	}
	podEvents := make(chan interfacestore.PodEvent, 64)
	policies := npcontroller.NewController(o.NodeName, cpClient, flows, store, npcontroller.Options{
		Recovered: recovered,
		PodEvents: podEvents,
		// A change that may forbid what was allowed purges the datapath
		// cache before the policy is reported realized: OVS re-translates
		// cached megaflows only after the commit is answered (package dpcache).
		OnNarrowed: func() {
			if err := purger.Sync(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Could not purge the datapath flow cache after a narrowing policy change")
			}
		},
		PacketIns: &npcontroller.PacketIns{IO: packets, Parser: flows, AuditLogDir: npcontroller.DefaultAuditLogDir},
	})
	rs.released = purger.Changed
	go policies.Run(ctx)
	// NetworkPolicy stats: the rules' counters, reported every interval.
	if o.StatsInterval > 0 {
		go stats.NewCollector(o.NodeName, o.StatsInterval, policies, flows, stats.ClientReporter{Client: cpClient}).Run(ctx)
	}
	// Traceflow: the flows of running Traceflows' tags, the injected packet
	// of those whose source Pod is here, and this node's observations.
	// Its own clients: a Traceflow makes a few requests per Node in a
	// burst, which client-go's default limit (5/s, burst 10), shared with
	// the policy status reports, spread over most of a second on the lab.
	tfConfig := rest.CopyConfig(kubeConfig)
	tfConfig.QPS, tfConfig.Burst = traceflow.ClientQPS, traceflow.ClientBurst
	tfCRD, err := versioned.NewForConfig(tfConfig)
	if err != nil {
		return err
	}
	tfKube, err := kubernetes.NewForConfig(tfConfig)
	if err != nil {
		return err
	}
	crdInformerFactory := crdinformers.NewSharedInformerFactory(tfCRD, 0)
	tracer := traceflow.NewController(traceflow.Config{NodeName: o.NodeName, Client: tfCRD, Kube: tfKube,
		Informer: crdInformerFactory.Crd().V1beta1().Traceflows(), Flows: flows, IO: packets, Interfaces: store,
		Rules: policies, Ports: traceflow.Ports{Gateway: uint32(nc.Gateway.OFPort), Tunnel: uint32(nc.TunnelOFPort)},
		GatewayMAC: nc.Gateway.MAC})
	crdInformerFactory.Start(ctx.Done())
	go tracer.Run(ctx)
	restoreErr := make(chan error, 1)
	go func() { restoreErr <- rs.finish(ctx, bridge, policies, ids, prevRound, round) }()

	apiErr, err := serveAPI(ctx, o, apiDeps{nodeIP: nodeIP, interfaces: store, ofc: ofc, policies: policies,
		agentInfo: startMonitor(ctx, o, cpClient, ovsdb, ofc, store, policies, podCIDRs, nc.BridgeName)})
	if err != nil {
		return err
	}

	cni, err := cniserver.New(cniserver.Config{
		SocketPath:  o.CNISocket,
		NodeName:    o.NodeName,
		PodCIDRs:    podCIDRs,
		MTU:         nc.PodMTU,
		IPAMDataDir: o.IPAMDataDir,
	}, cniserver.Deps{OVS: bridge, Flows: flows, InterfaceStore: store, PodEvents: podEvents, HostPorts: hostPorts})
	if err != nil {
		return err
	}
	if o.CNIConfDir != "" {
		if err := cni.WriteConfList(o.CNIConfDir); err != nil {
			return err
		}
	}
	cni.SetReady()
	klog.InfoS("Agent ready", "node", o.NodeName, "podCIDR", podCIDRs[0], "gateway", gwIP, "flowRound", round,
		"tunnel", nc.TunnelType, "datapath", nc.DatapathType, "proxy", o.EnableProxy)
	cniErr := make(chan error, 1)
	go func() { cniErr <- cni.Run(ctx) }()
	for {
		select {
		case <-ctx.Done():
			cleanUpIfUninstalled(client, nc.Gateway.Name)
			return nil
		case err := <-cniErr:
			return fmt.Errorf("CNI server: %w", err)
		case err := <-restoreErr:
			if err != nil {
				return err
			}
			restoreErr = nil // done: a nil channel never fires again
		case err := <-routeErr:
			return fmt.Errorf("node route controller: %w", err)
		case err := <-apiErr:
			return fmt.Errorf("agent API: %w", err)
		case err := <-proxyErr:
			if err == nil {
				return nil
			}
			return fmt.Errorf("proxy: %w", err)
		}
	}
}

// healthCheckAddresses are the node's IPv4 addresses within the
// nodePortAddresses prefixes, read once at start as kube-proxy does for its
// health checks; none (every address) when no prefix is given or none
// matches.
// serveProxyHealthz serves kube-proxy's health port in its place (proxyAll:
// no kube-proxy runs) at antreaProxy.healthzBindAddress, restarting the
// server 5 s after it fails (kube-proxy's own rule); nil when the key is "".
func serveProxyHealthz(ctx context.Context, o Options, f informers.SharedInformerFactory) *proxy.ProxyHealthServer {
	if !o.ProxyHealthzAddress.IsValid() {
		return nil
	}
	nodes := f.Core().V1().Nodes().Lister()
	hs := proxy.NewProxyHealthServer(proxy.DefaultProxyHealthTimeout, func() *corev1.Node {
		n, err := nodes.Get(o.NodeName)
		if err != nil {
			return nil
		}
		return n
	}, nil)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := hs.Serve(ctx, o.ProxyHealthzAddress); err != nil {
			klog.ErrorS(err, "kube-proxy's health server failed; restarting it in 5 s")
		}
	}, 5*time.Second)
	return hs
}

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

func prefixOf(n *net.IPNet) netip.Prefix {
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addrOf(n.IP), ones).Masked()
}

// waitRoutesInstalled waits (bounded) until every other node known at start
// has its route, so that stale flows of the previous round are deleted only
// after their replacements are in.
func waitRoutesInstalled(ctx context.Context, routes *route.Controller, f informers.SharedInformerFactory, self string) bool {
	lister := f.Core().V1().Nodes().Lister()
	f.WaitForCacheSync(ctx.Done())
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			return false, nil
		}
		installed := routes.Installed()
		for _, n := range nodes {
			if n.Name == self || n.Spec.PodCIDR == "" {
				continue
			}
			if _, ok := installed[n.Name]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	return ctx.Err() == nil
}

// pinTunnelNeighbor resolves a peer node's underlay MAC through the kernel
// and pins it in OVS's tunnel neighbour cache, against the userspace
// datapath's neighbour black hole (ENVIRONMENT.md). Only the netdev datapath
// needs it.
func pinTunnelNeighbor(ctx context.Context, o Options, nc *nodeinit.NodeConfig, peer net.IP, pinned func()) {
	if nc.Uplink.BridgeName == "" {
		return
	}
	link, err := netlink.LinkByName(nc.Uplink.BridgeName)
	if err != nil {
		klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer)
		return
	}
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		neighs, _ := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
		for _, n := range neighs {
			// Only a confirmed entry: a STALE one may hold the MAC of the
			// peer's uplink from when its address was on the uplink (its
			// antrea-ovs had stopped), not its br-phy's. Traffic below
			// makes the kernel confirm or replace it.
			if n.IP.Equal(peer) && len(n.HardwareAddr) == 6 && n.State&(netlink.NUD_REACHABLE|netlink.NUD_PERMANENT) != 0 {
				if err := nodeinit.PinTunnelNeighbor(ctx, o.OVSRunDir, nc.Uplink.BridgeName, peer, n.HardwareAddr); err != nil {
					klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer)
				} else {
					pinned()
				}
				return
			}
		}
		// Make the kernel resolve the peer: a datagram to the discard port.
		if c, err := net.Dial("udp4", net.JoinHostPort(peer.String(), "9")); err == nil {
			_, _ = c.Write([]byte{0})
			c.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	klog.InfoS("Could not resolve the peer's underlay MAC; tunnel neighbour not pinned", "peer", peer)
}
