// Package app runs antrea-agent: it brings up the node's OVS (bridge, gateway,
// tunnel, underlay), lays out the OpenFlow pipeline and installs the node's
// flows, rebuilds the interface store from OVSDB and replays the flows of
// existing pods, keeps routes to the other nodes, realizes Services (AntreaProxy,
// pkg/agent/proxy) and serves the CNI. Order matters: the CNI is served (and
// reports ready) only once the pipeline is in place, and flows of an earlier
// run are removed only after this run's flows replaced them, so a restart
// never leaves a window without flows (Service groups excepted: the proxy
// replaces them once its caches synced, see proxy.Run).
//
// The agent is built from parts (docs/design/agent.md): Run lists them in
// start-up order; each part's setup (setupX, in the file of its feature)
// records in deps what later parts use and registers its own agent API
// handlers and metrics; what it leaves running is a component, which
// runParts runs and stops in the reverse order.
package app

import (
	"context"
	"net"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/cniserver"
	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/dpcache"
	"antrea.io/antrea/pkg/agent/egress"
	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/l7engine"
	"antrea.io/antrea/pkg/agent/multicast"
	"antrea.io/antrea/pkg/agent/nodeinit"
	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/proxy"
	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/agent/wireguard"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/util/kernelconfig"
)

// Run runs the agent until ctx ends. The parts start in this order, each
// after the ones above it were set up and their components started, and
// stop in the reverse order; what each needs of the ones before it is in
// deps.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := checkEncryption(o.TrafficEncryptionMode, kernelconfig.Host()); err != nil {
		return err
	}
	o = withEncryption(o)
	return runParts(ctx, &deps{o: o}, []part{
		{"kubernetes clients", setupClients},
		{"controller client", setupControllerClient}, // antrea-controller dialed directly
		{"ovsdb", setupOVSDB},
		{"node", setupNode},                          // bridges, gateway, tunnel, underlay
		{"WireGuard", setupWireGuard},                // trafficEncryptionMode wireGuard: antrea-wg0, the key
		{"uninstall watcher", setupUninstallWatcher}, // stops after the parts below: cleans up after them
		{"openflow", setupOpenFlow},                  // the connection, replaying flows on reconnect
		{"pipeline", setupPipeline},                  // br-int held if empty, the node's flows
		{"pod interfaces", setupPodInterfaces},       // existing pods' flows, before the CNI serves
		{"node netfilter", setupNodeNetfilter},       // masquerade, existing pods' hostPorts
		{"datapath cache", setupDatapathCache},
		{"node routes", setupRoutes},
		{"tunnel neighbours", setupNeighbors},
		{"packet-ins", setupPacketIns},
		{"node path", setupNodePath}, // proxyAll
		{"proxy health", setupProxyHealth},
		{"AntreaProxy", setupProxy},
		{"FlowExporter", setupFlowExporter},
		{"informers", setupInformers},      // of the parts above
		{"peer routes", waitPeerRoutes},    // before policy recovery
		{"L7NetworkPolicy", setupL7Engine}, // the layer 7 engine, before the policies it enforces
		{"NetworkPolicy", setupPolicy},
		{"Traceflow", setupTraceflow},
		{"PacketCapture", setupPacketCapture},
		{"TrafficControl", setupTrafficControl},
		{"Multicast", setupMulticast},
		{"NetworkPolicy stats", setupPolicyStats}, // after Multicast: reports its groups too
		{"memberlist", setupMemberlist},           // before the features placing external IPs
		{"Egress", setupEgress},
		{"ServiceExternalIP", setupServiceExternalIP},
		{"BGPPolicy", setupBGPPolicy}, // after Egress: advertises its held IPs
		{"NodeLatencyMonitor", setupNodeLatencyMonitor},
		{"NodePortLocal", setupNodePortLocal},
		{"flow restore", setupFlowRestore}, // the previous run's flows go once policies are in
		{"monitor", setupMonitor},
		{"support bundle", setupSupportBundle},
		{"SupportBundleCollection", setupSupportBundleCollection},
		{"agent API", setupAgentAPI},
		{"CNI server", setupCNIServer}, // ready: serves pods last
	}, stopTimeout)
}

// deps is what the parts set up and later parts use: each field is set by
// the part named beside it and read only by parts after it in Run.
type deps struct {
	o Options

	// kubernetes clients
	kubeConfig *rest.Config
	kube       kubernetes.Interface
	// informers of the Kubernetes API, started by the part "informers":
	// a part registers the informers it reads before that.
	informers informers.SharedInformerFactory

	ovsdb *ovsconfig.Connection // ovsdb

	// node
	node     *corev1.Node
	podCIDRs []*net.IPNet
	// nodeIP is the transport interface's address when the agent found it
	// (no transportInterface configured); nil otherwise.
	nodeIP net.IP
	nc     *nodeinit.NodeConfig
	bridge *ovsconfig.OVSBridge

	// openflow
	ofc   *binding.Client
	flows *agentof.Client
	// round is this run's flow round; prevRound and bridgeIDs (br-int's
	// external_ids) are the previous run's, read at start.
	round     uint32
	prevRound uint64
	bridgeIDs map[string]string
	restore   *restore
	// repinNow fires when ovs-vswitchd reconnected: it forgot the tunnel
	// neighbours.
	repinNow chan struct{}

	// wireGuard is the node's WireGuard device (nil unless
	// trafficEncryptionMode wireGuard).
	wireGuard wireguard.Device

	gatewayIP   net.IP                        // pipeline
	gatewayIPv6 net.IP                        // pipeline: a dual-stack node's IPv6 gateway address
	store       interfacestore.InterfaceStore // pod interfaces
	// hostPorts is nil when the existing pods' hostPorts could not be
	// installed (node netfilter).
	hostPorts   cniserver.HostPortInstaller
	purger      *dpcache.Purger             // datapath cache
	routes      *route.Controller           // node routes
	nodeNet     *nodenet.Table              // the node's netfilter table
	packets     *agentof.PacketInDispatcher // packet-ins
	nodePath    *route.NodePath             // node path; nil without proxyAll
	proxyHealth *proxy.ProxyHealthServer    // proxy health; nil without proxyAll or address

	// crd is the clientset of crd.antrea.io (through kube-apiserver).
	crd versioned.Interface
	// controlplane reaches antrea-controller directly (package
	// controllerclient): use it for controlplane.antrea.io and
	// stats.antrea.io only.
	controlplane versioned.Interface

	// NetworkPolicy
	policies *npcontroller.Controller
	// policyRules is policies once set, for parts set up before it that
	// run concurrently with its setup (the FlowExporter names rules).
	policyRules atomic.Pointer[npcontroller.Controller]
	podEvents   chan interfacestore.PodEvent

	// l7 is the layer 7 engine (nil without the L7NetworkPolicy gate).
	l7 *l7engine.Engine

	// exporter is the FlowExporter (nil when it is off): the policy
	// controller hands it the packets policies deny.
	exporter *flowexporter.Exporter

	// multicast is the multicast controller (nil when multicast is off).
	multicast *multicast.Controller

	// cluster is the agents' memberlist (nil without Egress).
	cluster *egress.Cluster
	// egress is the Egress controller (nil without Egress).
	egress *egress.Controller

	// api collects what the parts serve on the agent API, which the part
	// "agent API" serves.
	api agentAPI
}
