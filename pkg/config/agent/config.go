// Package agent is antrea-agent's config file, antrea-agent.conf, in
// upstream Antrea's format: the same keys with the same defaults, for the
// keys this Antrea implements. Load decodes strictly: an unknown key, a
// value of the wrong type or a bad value is an error naming the file and the
// key. Upstream keys this Antrea does not implement are accepted at
// upstream's default value only (see unsupportedKeys), so the file upstream's
// chart writes loads here unchanged. docs/configuration.md describes every
// key; testdata/antrea-agent.conf is a commented example holding the defaults.
package agent

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"antrea.io/antrea/pkg/config"
	"antrea.io/antrea/pkg/config/internal/strict"
)

// FileName is the file's name where the manifest mounts it (/etc/antrea).
const FileName = "antrea-agent.conf"

// Feature gates this Antrea implements.
const (
	// AntreaProxy realizes Services in OVS (pkg/agent/proxy).
	AntreaProxy = "AntreaProxy"
	// NetworkPolicyStats reports the policy rules' traffic counters to the
	// controller (pkg/agent/stats).
	NetworkPolicyStats = "NetworkPolicyStats"
	// FlowExporter exports the node's connections as IPFIX records
	// (pkg/agent/flowexporter); it runs when flowExporter.enable is true too.
	FlowExporter = "FlowExporter"
	// PacketCapture gates the agent's PacketCapture controller (off by default, as upstream).
	PacketCapture = "PacketCapture"
	// L7NetworkPolicy gates the agent's layer 7 engine (pkg/agent/l7engine),
	// which enforces the rules with l7Protocols (off by default, as upstream).
	L7NetworkPolicy = "L7NetworkPolicy"
	// TrafficControl gates the agent's TrafficControl controller
	// (pkg/agent/trafficcontrol; off by default, as upstream).
	TrafficControl = "TrafficControl"
	// Multicast gates the agent's multicast controller (pkg/agent/multicast);
	// it runs when multicast.enable is true too (on by default, as upstream).
	Multicast = "Multicast"
	// NodeLatencyMonitor gates the agent's latency probes of the other Nodes
	// (pkg/agent/nodelatency; off by default, as upstream).
	NodeLatencyMonitor = "NodeLatencyMonitor"
	// NodeNetworkPolicy gates the realization of ClusterNetworkPolicies
	// applied to Nodes (a nodeSelector appliedTo) in the node's netfilter
	// (pkg/agent/nodenet, nodepolicy.go; off by default, as upstream).
	NodeNetworkPolicy = "NodeNetworkPolicy"
	// BGPPolicy gates the agent's BGP speaker (pkg/agent/bgp; off by default,
	// as upstream).
	BGPPolicy = "BGPPolicy"
	// Egress gates the agent's Egress (SNAT IPs held by nodes, memberlist).
	Egress = "Egress"
	// ServiceExternalIP gates the agent's answering for LoadBalancer IPs
	// allocated from ExternalIPPools (with proxyAll).
	ServiceExternalIP = "ServiceExternalIP"
	// EgressTrafficShaping gates the rate limits of Egresses'
	// spec.bandwidth (OVS meters on the node holding the Egress IP; off by
	// default, as upstream).
	EgressTrafficShaping = "EgressTrafficShaping"
	// NodePortLocal gates NodePortLocal (pkg/agent/nodeportlocal); it runs
	// when nodePortLocal.enable is true too. On by default, as upstream's
	// (GA since v1.14).
	NodePortLocal = "NodePortLocal"
	// SupportBundleCollection gates the agent's collection and upload of its
	// Node's support bundle for SupportBundleCollections (off by default, as
	// upstream).
	SupportBundleCollection = "SupportBundleCollection"
)

// Supported values.
const (
	DatapathSystem = "system"
	DatapathNetdev = "netdev"
	EncapModeEncap = "encap"
	// EncapModeNoEncap routes pod traffic between nodes over the underlay,
	// unencapsulated (docs/design/traffic-modes.md).
	EncapModeNoEncap = "noEncap"
	// EncapModeHybrid encapsulates pod traffic only towards nodes outside
	// this node's transport subnet and routes it, unencapsulated, to the
	// others (docs/design/traffic-modes.md).
	EncapModeHybrid = "hybrid"
	// EncapModeNetworkPolicyOnly chains Antrea after another CNI that owns
	// pod networking (addresses, routes between nodes); Antrea enforces
	// policy and serves Services on the pods' traffic
	// (docs/design/traffic-modes.md).
	EncapModeNetworkPolicyOnly = "networkPolicyOnly"
	TunnelGeneve               = "geneve"
	TunnelVXLAN                = "vxlan"
	TunnelGRE                  = "gre"
	// UplinkBridgeName is the OVS bridge that holds the uplink with the
	// netdev datapath (pkg/agent/nodeinit); no other bridge may take its name.
	UplinkBridgeName = "br-phy"
)

// AgentConfig is antrea-agent.conf. Field comments give upstream's meaning
// and default; the json tags are upstream's key names.
type AgentConfig struct {
	// FeatureGates maps feature names to on/off. Only gates this Antrea
	// implements are kept (AntreaProxy and NetworkPolicyStats, default
	// true; FlowExporter, default false).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// CNISocket is the unix socket the CNI plugin reaches the agent on.
	// Default /var/run/antrea/cni.sock.
	CNISocket string `json:"cniSocket"`
	// ClientConnection says how to reach kube-apiserver.
	ClientConnection config.ClientConnection `json:"clientConnection"`
	// OVSBridge is the integration bridge. Default br-int.
	OVSBridge string `json:"ovsBridge"`
	// OVSDatapathType is system (kernel) or netdev (userspace). Default system.
	OVSDatapathType string `json:"ovsDatapathType"`
	// OVSRunDir is where ovsdb-server's and ovs-vswitchd's sockets are.
	// Default /var/run/openvswitch.
	OVSRunDir string `json:"ovsRunDir"`
	// HostGateway is the node's gateway interface to pods. Default antrea-gw0.
	HostGateway string `json:"hostGateway"`
	// TrafficEncapMode is how inter-node pod traffic travels: encap (the
	// default: through tunnelType), noEncap (routed by the underlay) or
	// hybrid (routed inside the node's transport subnet, through
	// tunnelType to nodes outside it); upstream's spelling in any case. EncapMode gives its canonical form.
	TrafficEncapMode string `json:"trafficEncapMode"`
	// NoSNAT (noEncap and hybrid, as upstream's) leaves pod traffic to outside
	// the cluster with the pod's address: the underlay routes the pod CIDRs.
	NoSNAT bool `json:"noSNAT"`
	// TrafficEncryptionMode is how inter-node pod traffic is encrypted:
	// none (default), ipsec or wireGuard (upstream's values). The agent
	// refuses at start the modes it cannot run (pkg/agent/app, encryption.go).
	TrafficEncryptionMode string `json:"trafficEncryptionMode"`
	// WireGuard is the configuration of trafficEncryptionMode wireGuard.
	WireGuard WireGuardConfig `json:"wireGuard"`
	// Multicast is upstream's multicast section (multicast.enable and
	// the Multicast gate run pkg/agent/multicast).
	Multicast MulticastConfig `json:"multicast"`
	// TunnelType is geneve (default), vxlan or gre.
	TunnelType string `json:"tunnelType"`
	// TunnelCsum asks for outer UDP checksums on the tunnel. Default false.
	TunnelCsum bool `json:"tunnelCsum"`
	// DefaultMTU is the MTU of the gateway and pod interfaces; 0 (default)
	// means the transport interface's MTU minus the tunnel overhead.
	DefaultMTU int `json:"defaultMTU"`
	// TransportInterface is the node's interface that carries tunnel traffic;
	// "" (default) means the interface holding the Node's InternalIP.
	TransportInterface string `json:"transportInterface"`
	// KubeAPIServerOverride replaces kube-apiserver's address of the
	// kubeconfig or in-cluster config: a host, host:port or URL. Default "".
	KubeAPIServerOverride string `json:"kubeAPIServerOverride"`
	// APIPort is the port of the agent's API server (pkg/agent/apiserver).
	// Default 10350.
	APIPort int `json:"apiPort"`
	// ClusterPort is the port (TCP and UDP) of the agents' memberlist
	// cluster, which Egress uses to choose the node of each Egress IP.
	// Default 10351.
	ClusterPort int `json:"clusterPort"`
	// EnablePrometheusMetrics exports Antrea's metrics (pkg/agent/metrics) at
	// /metrics of the agent API. Default true.
	EnablePrometheusMetrics bool `json:"enablePrometheusMetrics"`
	// AntreaProxy holds AntreaProxy's options.
	AntreaProxy AntreaProxyConfig `json:"antreaProxy"`
	// FlowExporter holds the FlowExporter's options.
	FlowExporter FlowExporterConfig `json:"flowExporter"`
	// NodePortLocal holds NodePortLocal's options.
	NodePortLocal NodePortLocalConfig `json:"nodePortLocal"`
	// StatsCollectionInterval is how often the agent reads its policy rules'
	// counters and reports them to the controller (NetworkPolicyStats), as a
	// Go duration. Default 60s (upstream's fixed interval). Not an upstream key.
	StatsCollectionInterval string `json:"statsCollectionInterval"`
	// FQDNCacheMinTTL (seconds, upstream's key) is the shortest time an
	// address learned from a DNS answer for a toFQDN rule is kept, whatever
	// the answer's TTL; 0 (default): the answer's TTL.
	FQDNCacheMinTTL int `json:"fqdnCacheMinTTL"`
	// DNSServerOverride (upstream's key) is the DNS server the agent asks
	// for the exact names of toFQDN rules, "IP" or "IP:port" (port 53 when
	// absent); "" (default): the Service kube-system/kube-dns.
	DNSServerOverride string `json:"dnsServerOverride"`
}

// AntreaProxyConfig is the antreaProxy section.
type AntreaProxyConfig struct {
	// Enable runs AntreaProxy (upstream's replacement for the AntreaProxy
	// gate); it runs when both are true. Default true.
	Enable bool `json:"enable"`
	// ProxyAll also realizes Services for traffic that does not start in a
	// pod of this node: NodePorts, and traffic from the node itself and from
	// outside to ClusterIPs, external IPs and LoadBalancer IPs (the node
	// path, pkg/agent/route's NodePath). Default true, where upstream's is
	// false: this Antrea's AntreaProxy replaces kube-proxy, whose semantics
	// include NodePorts and the node's own traffic to ClusterIPs; set it
	// false when kube-proxy serves NodePorts beside AntreaProxy.
	ProxyAll bool `json:"proxyAll"`
	// NodePortAddresses are CIDRs selecting the node addresses NodePorts
	// are served on (with proxyAll); empty (default): every IPv4 address of
	// the node but loopback, link-local ones and the gateway's.
	NodePortAddresses []string `json:"nodePortAddresses,omitempty"`
	// SkipServices are Services (ClusterIP or namespace/name) AntreaProxy
	// leaves alone; not implemented: empty only.
	SkipServices []string `json:"skipServices,omitempty"`
	// ProxyLoadBalancerIPs load-balances traffic to LoadBalancer IPs.
	// Default true. AntreaProxy realizes ClusterIPs only, so traffic to
	// LoadBalancer IPs is never load-balanced here whatever the value.
	ProxyLoadBalancerIPs bool `json:"proxyLoadBalancerIPs"`
	// HealthzBindAddress is the IP:port of kube-proxy's health server
	// (/healthz and /livez, kube-proxy's healthzBindAddress), which the
	// agent serves in kube-proxy's place when AntreaProxy replaces it
	// (proxyAll); "" serves none. Default 0.0.0.0:10256, kube-proxy's.
	// Not an upstream key.
	HealthzBindAddress string `json:"healthzBindAddress"`
	// ServiceProxyName is the value of the Services' label
	// service.kubernetes.io/service-proxy-name that AntreaProxy serves:
	// set, it serves only Services with the label at that value; empty
	// (the default), only Services without the label, as kube-proxy does.
	ServiceProxyName string `json:"serviceProxyName,omitempty"`
}

// FlowExporterConfig is the flowExporter section (upstream's names and
// defaults).
type FlowExporterConfig struct {
	// Enable runs the FlowExporter (with the FlowExporter gate). Default false.
	Enable bool `json:"enable"`
	// FlowCollectorAddr is the collector: HOST[:PORT][:PROTO], HOST an IP
	// (IPv6 in brackets), a DNS name or a Service as namespace/name; PORT
	// defaults to 4739 (IPFIX), PROTO to tls as upstream's; PROTO grpc,
	// tls, tcp or udp. Default "flow-aggregator/flow-aggregator:14739:grpc"
	// (upstream's).
	FlowCollectorAddr string `json:"flowCollectorAddr"`
	// FlowPollInterval is how often conntrack is read. Default 5s.
	FlowPollInterval string `json:"flowPollInterval"`
	// ActiveFlowExportTimeout is how often a live connection is exported.
	// Default 5s.
	ActiveFlowExportTimeout string `json:"activeFlowExportTimeout"`
	// IdleFlowExportTimeout is how long a connection stays idle before its
	// idle record is sent. Default 15s.
	IdleFlowExportTimeout string `json:"idleFlowExportTimeout"`
}

// NodePortLocalConfig is the nodePortLocal section (upstream's names and
// defaults).
type NodePortLocalConfig struct {
	// Enable runs NodePortLocal (with the NodePortLocal gate). Default false.
	Enable bool `json:"enable"`
	// PortRange is the range of node ports handed out, "FIRST-LAST".
	// Default 61000-62000.
	PortRange string `json:"portRange"`
}

// DefaultNodePortLocalRange is nodePortLocal.portRange's default (upstream's
// on Linux).
const DefaultNodePortLocalRange = "61000-62000"

// ServiceNodePortRange is Kubernetes' default Service NodePort range
// (kube-apiserver --service-node-port-range): AntreaProxy's NodePorts
// (proxyAll) are DNATed by the node from it, so nodePortLocal.portRange
// must not overlap it.
const (
	ServiceNodePortFirst = 30000
	ServiceNodePortLast  = 32767
)

// ParsePortRange parses "FIRST-LAST", 1 <= FIRST <= LAST <= 65535.
func ParsePortRange(s string) (first, last int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		first, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			last, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	switch {
	case !ok || err != nil:
		return 0, 0, fmt.Errorf("%q is not a port range (want FIRST-LAST, e.g. %s)", s, DefaultNodePortLocalRange)
	case first < 1 || last > 65535 || first > last:
		return 0, 0, fmt.Errorf("%q is not a port range (want 1 <= FIRST <= LAST <= 65535)", s)
	}
	return first, last, nil
}

// NodePortLocalEnabled says whether NodePortLocal runs: its gate and
// nodePortLocal.enable.
func (c *AgentConfig) NodePortLocalEnabled() bool {
	return c.FeatureGates[NodePortLocal] && c.NodePortLocal.Enable
}

// DefaultHealthzBindAddress is antreaProxy.healthzBindAddress's default:
// kube-proxy's (its ports.ProxyHealthzPort on every IPv4 address).
const DefaultHealthzBindAddress = "0.0.0.0:10256"

// Defaults returns upstream's defaults.
func Defaults() *AgentConfig {
	return &AgentConfig{
		FeatureGates:            map[string]bool{AntreaProxy: true, NetworkPolicyStats: true, FlowExporter: false, PacketCapture: false, NodeLatencyMonitor: false, NodeNetworkPolicy: false, BGPPolicy: false, Egress: true, ServiceExternalIP: true, EgressTrafficShaping: false, NodePortLocal: true, SupportBundleCollection: false, TrafficControl: false, Multicast: true, L7NetworkPolicy: false},
		CNISocket:               "/var/run/antrea/cni.sock",
		OVSBridge:               "br-int",
		OVSDatapathType:         DatapathSystem,
		OVSRunDir:               "/var/run/openvswitch",
		HostGateway:             "antrea-gw0",
		TrafficEncapMode:        EncapModeEncap,
		TrafficEncryptionMode:   EncryptionModeNone,
		WireGuard:               WireGuardConfig{Port: 51820},
		Multicast:               MulticastConfig{IGMPQueryVersions: []int{1, 2, 3}, IGMPQueryInterval: "125s"},
		TunnelType:              TunnelGeneve,
		APIPort:                 10350,
		ClusterPort:             10351,
		EnablePrometheusMetrics: true,
		AntreaProxy: AntreaProxyConfig{Enable: true, ProxyAll: true, ProxyLoadBalancerIPs: true,
			HealthzBindAddress: DefaultHealthzBindAddress},
		FlowExporter: FlowExporterConfig{FlowCollectorAddr: "flow-aggregator/flow-aggregator:14739:grpc",
			FlowPollInterval: "5s", ActiveFlowExportTimeout: "5s", IdleFlowExportTimeout: "15s"},
		NodePortLocal:           NodePortLocalConfig{PortRange: DefaultNodePortLocalRange},
		StatsCollectionInterval: "60s",
	}
}

// Load reads the file at path over the defaults, strictly, and validates it.
func Load(path string) (*AgentConfig, error) {
	c := Defaults()
	if err := strict.Load(path, c, spec, c.validate); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse is Load for data read from file (named in errors).
func Parse(file string, data []byte) (*AgentConfig, error) {
	c := Defaults()
	if err := strict.Parse(file, data, c, spec, c.validate); err != nil {
		return nil, err
	}
	return c, nil
}

// NodePortPrefixes are antreaProxy.nodePortAddresses, parsed (Load
// validated them).
func (c *AgentConfig) NodePortPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range c.AntreaProxy.NodePortAddresses {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// HealthzAddrPort is antreaProxy.healthzBindAddress, parsed (Load validated
// it); ok is false when it is "" (no health server).
func (c *AgentConfig) HealthzAddrPort() (netip.AddrPort, bool) {
	ap, err := parseBindAddress(c.AntreaProxy.HealthzBindAddress)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return ap, true
}

// parseBindAddress parses IP:port (an IPv6 IP in brackets), the port 1 to
// 65535, as kube-proxy's healthzBindAddress takes it.
func parseBindAddress(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not IP:port (e.g. %s)", s, DefaultHealthzBindAddress)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%q: %q is not an IP address (e.g. 0.0.0.0)", s, host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%q: %q is not a port (want 1 to 65535)", s, port)
	}
	return netip.AddrPortFrom(ip, uint16(n)), nil
}

// StatsInterval returns statsCollectionInterval (validated).
func (c *AgentConfig) StatsInterval() time.Duration {
	d, err := time.ParseDuration(c.StatsCollectionInterval)
	if err != nil || d <= 0 {
		return 60 * time.Second
	}
	return d
}

// FlowExporterEnabled says whether the FlowExporter runs: its gate and
// flowExporter.enable.
func (c *AgentConfig) FlowExporterEnabled() bool {
	return c.FeatureGates[FlowExporter] && c.FlowExporter.Enable
}

// ProxyEnabled says whether AntreaProxy runs: its gate and antreaProxy.enable.
func (c *AgentConfig) ProxyEnabled() bool {
	return c.FeatureGates[AntreaProxy] && c.AntreaProxy.Enable
}

// Validate checks every value; each error names its key.
func (c *AgentConfig) Validate() error {
	return errors.Join(c.validate()...)
}

func (c *AgentConfig) validate() []error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	for _, name := range slices.Sorted(maps.Keys(c.FeatureGates)) {
		if !implementedGate(name) {
			fail("featureGates", "%q is not a feature gate this Antrea implements", name)
		}
	}
	if err := checkAbsPath(c.CNISocket); err != nil {
		fail("cniSocket", "%v", err)
	}
	if err := checkInterfaceName(c.OVSBridge); err != nil {
		fail("ovsBridge", "%v", err)
	} else if c.OVSBridge == UplinkBridgeName {
		fail("ovsBridge", "%q is reserved for the underlay bridge of the netdev datapath", c.OVSBridge)
	}
	switch c.OVSDatapathType {
	case DatapathSystem, DatapathNetdev:
	default:
		fail("ovsDatapathType", "%q is not a datapath type (want system or netdev)", c.OVSDatapathType)
	}
	if err := checkAbsPath(c.OVSRunDir); err != nil {
		fail("ovsRunDir", "%v", err)
	}
	if err := checkInterfaceName(c.HostGateway); err != nil {
		fail("hostGateway", "%v", err)
	} else if c.HostGateway == c.OVSBridge || c.HostGateway == UplinkBridgeName {
		fail("hostGateway", "%q is already the name of a bridge", c.HostGateway)
	}
	switch strings.ToLower(c.TrafficEncapMode) {
	case "encap", "noencap", "hybrid", "networkpolicyonly":
	default:
		fail("trafficEncapMode", "%q is not a mode (want encap, noEncap, hybrid or networkPolicyOnly)", c.TrafficEncapMode)
	}
	if _, ok := encryptionModes[strings.ToLower(c.TrafficEncryptionMode)]; !ok {
		fail("trafficEncryptionMode", "%q is not a mode (want none, ipsec or wireGuard)", c.TrafficEncryptionMode)
	}
	switch c.TunnelType {
	case TunnelGeneve, TunnelVXLAN, TunnelGRE:
	case "stt":
		fail("tunnelType", "%q is not supported (want geneve, vxlan or gre)", c.TunnelType)
	default:
		fail("tunnelType", "%q is not a tunnel type (want geneve, vxlan or gre)", c.TunnelType)
	}
	if c.DefaultMTU != 0 && (c.DefaultMTU < 68 || c.DefaultMTU > 65535) {
		fail("defaultMTU", "%d is out of range (want 0 for automatic, or 68 to 65535)", c.DefaultMTU)
	}
	if c.TransportInterface != "" {
		if err := checkInterfaceName(c.TransportInterface); err != nil {
			fail("transportInterface", "%v", err)
		}
	}
	if _, err := config.ParseAPIServerOverride(c.KubeAPIServerOverride); err != nil {
		fail("kubeAPIServerOverride", "%v", err)
	}
	if c.APIPort < 1 || c.APIPort > 65535 {
		fail("apiPort", "%d is not a port (want 1 to 65535)", c.APIPort)
	}
	if c.WireGuard.Port < 1 || c.WireGuard.Port > 65535 {
		fail("wireGuard.port", "%d is not a port (want 1 to 65535)", c.WireGuard.Port)
	}
	for i, v := range c.Multicast.IGMPQueryVersions {
		if v < 1 || v > 3 {
			fail(fmt.Sprintf("multicast.igmpQueryVersions[%d]", i), "%d is not an IGMP version (want 1, 2 or 3)", v)
		}
	}
	if d, err := time.ParseDuration(c.Multicast.IGMPQueryInterval); err != nil || d < time.Second {
		fail("multicast.igmpQueryInterval", "%q is not a duration of 1s or more (such as 125s)", c.Multicast.IGMPQueryInterval)
	}
	if c.ClusterPort < 1 || c.ClusterPort > 65535 {
		fail("clusterPort", "%d is not a port (want 1 to 65535)", c.ClusterPort)
	}
	for _, s := range c.AntreaProxy.NodePortAddresses {
		if p, err := netip.ParsePrefix(s); err != nil {
			fail("antreaProxy.nodePortAddresses", "%q is not a CIDR (e.g. 192.168.77.0/24)", s)
		} else if !p.Addr().Is4() {
			fail("antreaProxy.nodePortAddresses", "%q is not IPv4 (only IPv4 NodePorts are realized)", s)
		}
	}
	if c.AntreaProxy.HealthzBindAddress != "" {
		if _, err := parseBindAddress(c.AntreaProxy.HealthzBindAddress); err != nil {
			fail("antreaProxy.healthzBindAddress", "%v", err)
		}
	}
	if c.AntreaProxy.ServiceProxyName != "" {
		if msgs := validation.IsValidLabelValue(c.AntreaProxy.ServiceProxyName); len(msgs) > 0 {
			fail("antreaProxy.serviceProxyName", "%q is not a label value: %s", c.AntreaProxy.ServiceProxyName, strings.Join(msgs, "; "))
		}
	}
	if c.DNSServerOverride != "" {
		if _, err := DNSServerAddr(c.DNSServerOverride); err != nil {
			fail("dnsServerOverride", "%v", err)
		}
	}
	if c.FQDNCacheMinTTL < 0 {
		fail("fqdnCacheMinTTL", "%d is negative (seconds; 0 keeps each answer's TTL)", c.FQDNCacheMinTTL)
	}
	if d, err := time.ParseDuration(c.StatsCollectionInterval); err != nil || d < time.Second {
		fail("statsCollectionInterval", "%q is not a duration of at least 1s (e.g. 60s)", c.StatsCollectionInterval)
	}
	errs = append(errs, c.FlowExporter.validate(c.FlowExporterEnabled())...)
	if first, last, err := ParsePortRange(c.NodePortLocal.PortRange); err != nil {
		fail("nodePortLocal.portRange", "%v", err)
	} else if first <= ServiceNodePortLast && last >= ServiceNodePortFirst {
		fail("nodePortLocal.portRange", "%q overlaps the Service NodePort range %d-%d (AntreaProxy's NodePorts)",
			c.NodePortLocal.PortRange, ServiceNodePortFirst, ServiceNodePortLast)
	}
	if len(c.AntreaProxy.SkipServices) > 0 {
		fail("antreaProxy.skipServices", "%q is not supported by this Antrea (only an empty list)", c.AntreaProxy.SkipServices)
	}
	return errs
}

func implementedGate(name string) bool {
	for _, g := range spec.Gates {
		if g.Name == name {
			return g.Implemented
		}
	}
	return false
}

// checkInterfaceName accepts a Linux interface name (IFNAMSIZ-1 bytes, no
// '/', no whitespace, not "." or "..").
func checkInterfaceName(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > 15:
		return fmt.Errorf("%q is longer than 15 characters (an interface name)", s)
	case s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n"):
		return fmt.Errorf("%q is not a valid interface name", s)
	}
	return nil
}

func checkAbsPath(s string) error {
	if !filepath.IsAbs(s) {
		return fmt.Errorf("%q is not an absolute path", s)
	}
	return nil
}

// EncapMode is TrafficEncapMode in its canonical spelling (EncapModeEncap,
// EncapModeNoEncap, EncapModeHybrid or EncapModeNetworkPolicyOnly); the file may spell it in any case,
// as upstream's.
func (c *AgentConfig) EncapMode() string {
	for _, m := range EncapModes {
		if strings.EqualFold(c.TrafficEncapMode, m) {
			return m
		}
	}
	return EncapModeEncap
}

// EncapModes are the trafficEncapMode values this Antrea realizes.
var EncapModes = []string{EncapModeEncap, EncapModeNoEncap, EncapModeHybrid, EncapModeNetworkPolicyOnly}

// DNSServerAddr reads dnsServerOverride: an IP address with or without a
// port, as "IP:port" (port 53 by default).
func DNSServerAddr(s string) (string, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address, with or without a port", s)
	}
	return netip.AddrPortFrom(a, 53).String(), nil
}

// Traffic encryption modes, upstream's spellings.
const (
	EncryptionModeNone      = "none"
	EncryptionModeIPsec     = "ipsec"
	EncryptionModeWireGuard = "wireGuard"
)

// encryptionModes map the lower-cased modes to their spelling.
var encryptionModes = map[string]string{"none": EncryptionModeNone, "": EncryptionModeNone,
	"ipsec": EncryptionModeIPsec, "wireguard": EncryptionModeWireGuard}

// MulticastConfig is upstream's multicast section.
type MulticastConfig struct {
	// Enable runs the multicast controller (with the Multicast gate).
	Enable bool `json:"enable"`
	// multicastInterfaces, upstream's interfaces for multicast to and
	// from outside the cluster, is accepted empty only (upstream.go).
	// IGMPQueryVersions are the versions of the general queries sent to
	// the Pods. Default [1, 2, 3], as upstream; [3] is enough (a v3 query
	// is answered by hosts of every version, RFC 3376 §7) and better: a v1
	// query puts a Linux Pod in IGMPv1 mode for 400 s, in which it sends
	// no leaves, so its memberships end only when they expire.
	IGMPQueryVersions []int `json:"igmpQueryVersions"`
	// IGMPQueryInterval is how often they are sent; a membership not
	// reported for three intervals expires. Default 125s.
	IGMPQueryInterval string `json:"igmpQueryInterval"`
}

// MulticastEnabled says whether multicast runs: its gate and
// multicast.enable.
func (c *AgentConfig) MulticastEnabled() bool {
	return c.FeatureGates[Multicast] && c.Multicast.Enable
}

// QueryInterval is multicast.igmpQueryInterval (validated).
func (m MulticastConfig) QueryInterval() time.Duration {
	d, _ := time.ParseDuration(m.IGMPQueryInterval)
	return d
}

// WireGuardConfig is upstream's wireGuard section.
type WireGuardConfig struct {
	// Port is the UDP port WireGuard listens on and sends to on the peer
	// nodes. Default 51820.
	Port int `json:"port"`
}

// EncryptionMode is TrafficEncryptionMode in its canonical spelling
// (validated).
func (c *AgentConfig) EncryptionMode() string {
	return encryptionModes[strings.ToLower(c.TrafficEncryptionMode)]
}
