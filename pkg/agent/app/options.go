package app

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"antrea.io/antrea/pkg/agent/nodeportlocal"
	"antrea.io/antrea/pkg/agent/wireguard"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// Options are the agent's settings: the config file (--config, upstream's
// antrea-agent.conf, pkg/config/agent) with the flags given on the command
// line on top. The flags serve the lab's node simulator and tests.
type Options struct {
	// ConfigFile is the antrea-agent.conf to read; "" means the defaults.
	ConfigFile string
	Kubeconfig string
	// KubeAPIServerOverride replaces kube-apiserver's address (host,
	// host:port or URL); "" keeps the kubeconfig's or in-cluster one.
	KubeAPIServerOverride string
	// ControlplaneThroughKubeAPIServer makes the agent reach antrea-controller
	// through kube-apiserver's aggregation layer instead of dialing it
	// (package controllerclient): for the node simulator's lab, whose
	// controller listens on the control plane's loopback, out of the
	// nodes' reach. Flag only.
	ControlplaneThroughKubeAPIServer bool
	NodeName                         string
	OVSBridge                        string // integration bridge (br-int)
	HostGateway                      string // gateway interface (antrea-gw0)
	OVSRunDir                        string // ovsdb-server and ovs-vswitchd run dir (db.sock, <bridge>.mgmt)
	DatapathType                     string // netdev or system
	// TrafficEncapMode is encap (through the tunnel), noEncap (routed by
	// the underlay) or hybrid (routed inside the transport subnet, through
	// the tunnel outside it), canonically spelled (agentconfig.EncapMode*).
	TrafficEncapMode string
	// TrafficEncryptionMode is trafficEncryptionMode, canonically spelled
	// (agentconfig.EncryptionMode*): Run refuses what it cannot run
	// (encryption.go).
	TrafficEncryptionMode string
	// WireGuardPort is wireGuard.port: WireGuard's UDP port on every node.
	WireGuardPort int
	// WireGuardKeyFile holds the node's WireGuard private key
	// (wireguard.DefaultKeyFile; the lab's per-node path in tests).
	WireGuardKeyFile string
	// NoSNAT (noEncap and hybrid) keeps pod traffic to outside the cluster
	// unmasqueraded.
	NoSNAT     bool
	TunnelType string // geneve, vxlan or gre
	TunnelCsum bool   // outer UDP checksums on the tunnel
	// UplinkName is the node's underlay (transport) interface; "" means the
	// interface holding the Node's InternalIP (see transportInterface).
	UplinkName string
	CNISocket  string
	// CNIConfDir is where the agent writes the CNI conflist; "" (the default)
	// writes none: the manifest's install-cni init container installs it.
	CNIConfDir  string
	IPAMDataDir string
	MTU         int
	// EnableProxy runs AntreaProxy: ClusterIP Services in OVS (the feature
	// gate upstream calls AntreaProxy, and antreaProxy.enable).
	EnableProxy bool
	// ProxyAll (antreaProxy.proxyAll) adds the node path to AntreaProxy:
	// NodePorts, and Services for the node's own and outside traffic.
	ProxyAll bool
	// NodePortAddresses (antreaProxy.nodePortAddresses) select the node
	// addresses serving NodePorts; empty: all of them.
	NodePortAddresses []netip.Prefix
	// ServiceProxyName (antreaProxy.serviceProxyName) is the value of
	// the label service.kubernetes.io/service-proxy-name of the Services
	// AntreaProxy serves; empty: those without the label.
	ServiceProxyName string
	// ProxyHealthzAddress (antreaProxy.healthzBindAddress) is where
	// kube-proxy's health port is served with proxyAll; invalid: nowhere.
	ProxyHealthzAddress netip.AddrPort
	// APIPort is the agent API's port (apiPort); 0 serves no API.
	APIPort int
	// ClusterPort (clusterPort) is the port of the agents' memberlist, on
	// TCP and UDP (Egress).
	ClusterPort int
	// EnablePrometheusMetrics (enablePrometheusMetrics) exports Antrea's
	// metrics at the agent API's /metrics.
	EnablePrometheusMetrics bool
	// FeatureGates are the conf file's effective gates (/featuregates).
	FeatureGates map[string]bool
	// FlowExporter runs the FlowExporter (featureGates.FlowExporter and
	// flowExporter.enable); nil runs none.
	FlowExporter *FlowExporterOptions
	// NodePortLocal is nodePortLocal.portRange when NodePortLocal runs
	// (featureGates.NodePortLocal and nodePortLocal.enable); nil runs none.
	NodePortLocal *nodeportlocal.PortRange
	// StatsInterval is how often the policy rules' counters are reported to
	// the controller (statsCollectionInterval, when the NetworkPolicyStats
	// gate is on); 0 reports none.
	StatsInterval time.Duration
	// FQDNCacheMinTTL is fqdnCacheMinTTL: the shortest time an address
	// learned for a toFQDN rule is kept.
	FQDNCacheMinTTL time.Duration
	// Multicast runs the multicast controller (featureGates.Multicast
	// and multicast.enable); nil runs none.
	Multicast *MulticastOptions
	// DNSServerOverride is dnsServerOverride as "IP:port" ("" asks the
	// Service kube-system/kube-dns).
	DNSServerOverride string
}

// NewOptions returns the options of the default config file, the node name
// from $NODE_NAME.
func NewOptions() Options {
	o := Options{
		NodeName:         os.Getenv("NODE_NAME"),
		IPAMDataDir:      "/var/lib/antrea/ipam",
		WireGuardKeyFile: wireguard.DefaultKeyFile,
	}
	o.applyConfig(agentconfig.Defaults(), nil)
	return o
}

// AddFlags registers --config and the flags that override the file's keys.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "the agent's config file (antrea-agent.conf); flags given explicitly override its keys")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the cluster (empty: in-cluster config) [clientConnection.kubeconfig]")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "name of this node (default $NODE_NAME)")
	fs.BoolVar(&o.ControlplaneThroughKubeAPIServer, "controlplane-through-kube-apiserver", o.ControlplaneThroughKubeAPIServer,
		"reach antrea-controller through kube-apiserver's aggregation layer instead of dialing its Service's endpoint (the node simulator's lab, where the controller listens on the control plane's loopback)")
	fs.StringVar(&o.OVSRunDir, "ovs-run-dir", o.OVSRunDir, "run directory of ovsdb-server and ovs-vswitchd [ovsRunDir]")
	fs.StringVar(&o.DatapathType, "ovs-datapath", o.DatapathType, "OVS datapath type: system (kernel) or netdev (userspace) [ovsDatapathType]")
	fs.StringVar(&o.TunnelType, "tunnel-type", o.TunnelType, "encapsulation between nodes: geneve, vxlan or gre [tunnelType]")
	fs.StringVar(&o.TrafficEncapMode, "traffic-encap-mode", o.TrafficEncapMode, "how pod traffic between nodes travels: encap (through the tunnel), noEncap (routed by the underlay) or hybrid (routed inside the node's transport subnet, through the tunnel outside it) [trafficEncapMode]")
	fs.StringVar(&o.UplinkName, "uplink", o.UplinkName, "the node's underlay interface (empty: the one holding the Node's InternalIP) [transportInterface]")
	fs.StringVar(&o.CNISocket, "cni-socket", o.CNISocket, "unix socket of the CNI gRPC API [cniSocket]")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", o.CNIConfDir, "directory the CNI conflist is written to (empty: do not write; install-cni does)")
	fs.StringVar(&o.IPAMDataDir, "ipam-data-dir", o.IPAMDataDir, "host-local IPAM state directory")
	fs.StringVar(&o.WireGuardKeyFile, "wireguard-key-file", o.WireGuardKeyFile, "the node's WireGuard private key (trafficEncryptionMode wireGuard): read, or made with mode 0600 when absent; delete it and restart the agent to rotate the key")
	fs.IntVar(&o.MTU, "mtu", o.MTU, "pod MTU (0: the uplink MTU minus the tunnel overhead) [defaultMTU]")
	fs.BoolVar(&o.EnableProxy, "enable-proxy", o.EnableProxy, "realize ClusterIP Services in OVS (AntreaProxy); off: leave Services to kube-proxy [featureGates.AntreaProxy, antreaProxy.enable]")
	fs.IntVar(&o.APIPort, "api-port", o.APIPort, "port of the agent API (HTTPS; 0: no API) [apiPort]")
	fs.StringVar(&o.ServiceProxyName, "service-proxy-name", o.ServiceProxyName, "serve only Services labelled service.kubernetes.io/service-proxy-name with this value (empty: only Services without the label) [antreaProxy.serviceProxyName]")
	fs.BoolVar(&o.ProxyAll, "proxy-all", o.ProxyAll, "AntreaProxy also realizes NodePorts and Services for the node's own and outside traffic (no kube-proxy needed) [antreaProxy.proxyAll]")
}

// Complete reads the config file, if one was given, and applies its keys
// except where a flag of fs was given explicitly: the flag wins.
func (o *Options) Complete(fs *flag.FlagSet) error {
	if o.ConfigFile == "" {
		return nil
	}
	cfg, err := agentconfig.Load(o.ConfigFile)
	if err != nil {
		return err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	o.applyConfig(cfg, explicit)
	o.normalize()
	return nil
}

// applyConfig sets every option the file holds, except those whose flag
// (named next to each) is in explicit.
func (o *Options) applyConfig(c *agentconfig.AgentConfig, explicit map[string]bool) {
	set := func(flag string, apply func()) {
		if flag == "" || !explicit[flag] {
			apply()
		}
	}
	set("kubeconfig", func() { o.Kubeconfig = c.ClientConnection.Kubeconfig })
	set("", func() { o.KubeAPIServerOverride = c.KubeAPIServerOverride })
	set("", func() { o.OVSBridge = c.OVSBridge })
	set("", func() { o.HostGateway = c.HostGateway })
	set("ovs-run-dir", func() { o.OVSRunDir = c.OVSRunDir })
	set("ovs-datapath", func() { o.DatapathType = c.OVSDatapathType })
	set("tunnel-type", func() { o.TunnelType = c.TunnelType })
	set("traffic-encap-mode", func() { o.TrafficEncapMode = c.EncapMode() })
	set("", func() { o.TrafficEncryptionMode = c.EncryptionMode() })
	set("", func() { o.WireGuardPort = c.WireGuard.Port })
	set("", func() { o.NoSNAT = c.NoSNAT })
	set("", func() { o.TunnelCsum = c.TunnelCsum })
	set("uplink", func() { o.UplinkName = c.TransportInterface })
	set("cni-socket", func() { o.CNISocket = c.CNISocket })
	set("mtu", func() { o.MTU = c.DefaultMTU })
	set("enable-proxy", func() { o.EnableProxy = c.ProxyEnabled() })
	set("proxy-all", func() { o.ProxyAll = c.AntreaProxy.ProxyAll })
	set("", func() { o.NodePortAddresses = c.NodePortPrefixes() })
	set("service-proxy-name", func() { o.ServiceProxyName = c.AntreaProxy.ServiceProxyName })
	set("", func() { o.ProxyHealthzAddress, _ = c.HealthzAddrPort() })
	set("api-port", func() { o.APIPort = c.APIPort })
	set("", func() { o.ClusterPort = c.ClusterPort })
	set("", func() { o.EnablePrometheusMetrics = c.EnablePrometheusMetrics })
	set("", func() { o.FeatureGates = c.FeatureGates })
	set("", func() {
		o.FlowExporter = nil
		if c.FlowExporterEnabled() {
			a, _ := agentconfig.ParseCollectorAddr(c.FlowExporter.FlowCollectorAddr)
			t := c.FlowExporter.Times()
			o.FlowExporter = &FlowExporterOptions{Collector: a, Poll: t.Poll, Active: t.Active, Idle: t.Idle}
		}
	})
	set("", func() {
		o.NodePortLocal = nil
		if c.NodePortLocalEnabled() {
			first, last, _ := agentconfig.ParsePortRange(c.NodePortLocal.PortRange)
			o.NodePortLocal = &nodeportlocal.PortRange{First: uint16(first), Last: uint16(last)}
		}
	})
	set("", func() {
		o.Multicast = nil
		if c.MulticastEnabled() {
			o.Multicast = &MulticastOptions{QueryVersions: slices.Clone(c.Multicast.IGMPQueryVersions),
				QueryInterval: c.Multicast.QueryInterval()}
		}
	})
	set("", func() { o.FQDNCacheMinTTL = time.Duration(c.FQDNCacheMinTTL) * time.Second })
	set("", func() {
		o.DNSServerOverride = ""
		if c.DNSServerOverride != "" {
			o.DNSServerOverride, _ = agentconfig.DNSServerAddr(c.DNSServerOverride)
		}
	})
	set("", func() {
		o.StatsInterval = 0
		if c.FeatureGates[agentconfig.NetworkPolicyStats] {
			o.StatsInterval = c.StatsInterval()
		}
	})
}

// normalize spells TrafficEncapMode canonically: upstream accepts any case.
func (o *Options) normalize() {
	for _, m := range agentconfig.EncapModes {
		if strings.EqualFold(o.TrafficEncapMode, m) {
			o.TrafficEncapMode = m
		}
	}
}

// validate checks what flags may have set wrong (the file's keys were
// checked when it was loaded).
func (o *Options) validate() error {
	o.normalize()
	switch {
	case o.NodeName == "":
		return errors.New("--node-name (or NODE_NAME) is required")
	case o.OVSRunDir == "":
		return errors.New("--ovs-run-dir is required")
	case o.DatapathType != agentconfig.DatapathNetdev && o.DatapathType != agentconfig.DatapathSystem:
		return fmt.Errorf("--ovs-datapath %q: want netdev or system", o.DatapathType)
	case !ovsconfig.TunnelType(o.TunnelType).Valid():
		return fmt.Errorf("--tunnel-type %q: want %s", o.TunnelType, ovsconfig.TunnelTypeNames())
	case !slices.Contains(agentconfig.EncapModes, o.TrafficEncapMode):
		return fmt.Errorf("--traffic-encap-mode %q: want %s", o.TrafficEncapMode, strings.Join(agentconfig.EncapModes, ", "))
	}
	return nil
}
