package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/config/internal/strict"
)

func TestExampleFileHoldsTheDefaults(t *testing.T) {
	got, err := Load(filepath.Join("testdata", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if want := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("testdata/%s:\n got %+v\nwant %+v", FileName, got, want)
	}
}

func TestDefaultsAreValid(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Error(err)
	}
	if !Defaults().ProxyEnabled() {
		t.Error("AntreaProxy is off by default, want on")
	}
}

func TestEveryKeySetsItsField(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want func(c *AgentConfig)
	}{
		{"an empty file gives the defaults", "", nil},
		{"AntreaProxy can be turned off", "featureGates:\n  AntreaProxy: false\n",
			func(c *AgentConfig) { c.FeatureGates[AntreaProxy] = false }},
		{"featureGates without AntreaProxy keeps it on", "featureGates:\n  Traceflow: true\n", nil},
		{"cniSocket sets the socket", "cniSocket: /run/antrea/cni.sock\n",
			func(c *AgentConfig) { c.CNISocket = "/run/antrea/cni.sock" }},
		{"clientConnection.kubeconfig sets the kubeconfig", "clientConnection:\n  kubeconfig: /etc/antrea/kc\n",
			func(c *AgentConfig) { c.ClientConnection.Kubeconfig = "/etc/antrea/kc" }},
		{"ovsBridge sets the bridge", "ovsBridge: br-x\n", func(c *AgentConfig) { c.OVSBridge = "br-x" }},
		{"ovsDatapathType netdev is accepted", "ovsDatapathType: netdev\n",
			func(c *AgentConfig) { c.OVSDatapathType = DatapathNetdev }},
		{"ovsRunDir sets the run dir", "ovsRunDir: /run/ovs\n", func(c *AgentConfig) { c.OVSRunDir = "/run/ovs" }},
		{"hostGateway sets the gateway", "hostGateway: gw0\n", func(c *AgentConfig) { c.HostGateway = "gw0" }},
		{"trafficEncapMode encap is accepted", "trafficEncapMode: encap\n", nil},
		{"trafficEncapMode networkPolicyOnly is accepted", "trafficEncapMode: networkPolicyOnly\n",
			func(c *AgentConfig) { c.TrafficEncapMode = EncapModeNetworkPolicyOnly }},
		{"tunnelType vxlan is accepted", "tunnelType: vxlan\n", func(c *AgentConfig) { c.TunnelType = TunnelVXLAN }},
		{"tunnelCsum turns checksums on", "tunnelCsum: true\n", func(c *AgentConfig) { c.TunnelCsum = true }},
		{"defaultMTU sets the MTU", "defaultMTU: 1400\n", func(c *AgentConfig) { c.DefaultMTU = 1400 }},
		{"transportInterface names the uplink", "transportInterface: eth1\n",
			func(c *AgentConfig) { c.TransportInterface = "eth1" }},
		{"kubeAPIServerOverride takes a URL", "kubeAPIServerOverride: https://10.0.0.1:6443\n",
			func(c *AgentConfig) { c.KubeAPIServerOverride = "https://10.0.0.1:6443" }},
		{"kubeAPIServerOverride takes host:port", "kubeAPIServerOverride: 10.0.0.1:6443\n",
			func(c *AgentConfig) { c.KubeAPIServerOverride = "10.0.0.1:6443" }},
		{"apiPort sets the port", "apiPort: 10360\n", func(c *AgentConfig) { c.APIPort = 10360 }},
		{"enablePrometheusMetrics can be turned off", "enablePrometheusMetrics: false\n",
			func(c *AgentConfig) { c.EnablePrometheusMetrics = false }},
		{"antreaProxy.enable can be turned off", "antreaProxy:\n  enable: false\n",
			func(c *AgentConfig) { c.AntreaProxy.Enable = false }},
		{"antreaProxy.proxyAll can be turned off", "antreaProxy:\n  proxyAll: false\n",
			func(c *AgentConfig) { c.AntreaProxy.ProxyAll = false }},
		{"antreaProxy.nodePortAddresses empty is accepted", "antreaProxy:\n  nodePortAddresses: []\n", nil},
		{"antreaProxy.nodePortAddresses takes CIDRs", "antreaProxy:\n  nodePortAddresses: [192.168.77.0/24, 10.0.0.0/8]\n",
			func(c *AgentConfig) { c.AntreaProxy.NodePortAddresses = []string{"192.168.77.0/24", "10.0.0.0/8"} }},
		{"antreaProxy.skipServices empty is accepted", "antreaProxy:\n  skipServices: []\n", nil},
		{"antreaProxy.healthzBindAddress takes another address", "antreaProxy:\n  healthzBindAddress: 127.0.0.1:10257\n",
			func(c *AgentConfig) { c.AntreaProxy.HealthzBindAddress = "127.0.0.1:10257" }},
		{"antreaProxy.healthzBindAddress takes an IPv6 address", "antreaProxy:\n  healthzBindAddress: \"[::]:10256\"\n",
			func(c *AgentConfig) { c.AntreaProxy.HealthzBindAddress = "[::]:10256" }},
		{"antreaProxy.healthzBindAddress empty turns the health server off", "antreaProxy:\n  healthzBindAddress: \"\"\n",
			func(c *AgentConfig) { c.AntreaProxy.HealthzBindAddress = "" }},
		{"nodePortLocal.enable turns NodePortLocal on", "nodePortLocal:\n  enable: true\n",
			func(c *AgentConfig) { c.NodePortLocal.Enable = true }},
		{"nodePortLocal.portRange sets the range", "nodePortLocal:\n  portRange: 40000-41000\n",
			func(c *AgentConfig) { c.NodePortLocal.PortRange = "40000-41000" }},
		{"antreaProxy.serviceProxyName names the proxy", "antreaProxy:\n  serviceProxyName: antrea\n",
			func(c *AgentConfig) { c.AntreaProxy.ServiceProxyName = "antrea" }},
		{"antreaProxy.proxyLoadBalancerIPs can be turned off", "antreaProxy:\n  proxyLoadBalancerIPs: false\n",
			func(c *AgentConfig) { c.AntreaProxy.ProxyLoadBalancerIPs = false }},
		{"fqdnCacheMinTTL sets the shortest time a learned address is kept", "fqdnCacheMinTTL: 30\n",
			func(c *AgentConfig) { c.FQDNCacheMinTTL = 30 }},
		{"dnsServerOverride names the DNS server of toFQDN names", "dnsServerOverride: 10.96.0.10\n",
			func(c *AgentConfig) { c.DNSServerOverride = "10.96.0.10" }},
		{"an upstream key at its default is accepted", "noSNAT: false\ntunnelPort: 0\ntrafficEncryptionMode: none\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(FileName, []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			if tc.want != nil {
				tc.want(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestBadValuesAreRefusedNamingTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"an unknown key is refused with the closest key", "tunnelTyp: vxlan\n",
			`antrea-agent.conf: unknown key "tunnelTyp" (did you mean "tunnelType"?)`},
		{"an unknown nested key is refused", "antreaProxy:\n  proxyAl: false\n",
			`antrea-agent.conf: unknown key "antreaProxy.proxyAl" (did you mean "antreaProxy.proxyAll"?)`},
		{"a key outside its section is pointed to it", "proxyAll: false\n",
			`antrea-agent.conf: unknown key "proxyAll" (did you mean "antreaProxy.proxyAll"?)`},
		{"an unknown feature gate is refused", "featureGates:\n  AntreaProxi: true\n",
			`antrea-agent.conf: featureGates: unknown feature gate "AntreaProxi" (did you mean "AntreaProxy"?)`},
		{"an upstream gate that is off upstream cannot be turned on", "featureGates:\n  Multicluster: true\n",
			`antrea-agent.conf: featureGates.Multicluster: true is not supported by this Antrea`},
		{"stt is refused", "tunnelType: stt\n",
			`antrea-agent.conf: tunnelType: "stt" is not supported (want geneve, vxlan or gre)`},
		{"a made-up tunnel type is refused", "tunnelType: ipip\n",
			`antrea-agent.conf: tunnelType: "ipip" is not a tunnel type (want geneve, vxlan or gre)`},
		{"a made-up encap mode is refused", "trafficEncapMode: tunnel\n",
			`antrea-agent.conf: trafficEncapMode: "tunnel" is not a mode`},
		{"a made-up datapath is refused", "ovsDatapathType: dpdk\n",
			`antrea-agent.conf: ovsDatapathType: "dpdk" is not a datapath type (want system or netdev)`},
		{"an MTU too small is refused", "defaultMTU: 20\n",
			`antrea-agent.conf: defaultMTU: 20 is out of range`},
		{"an MTU given as a string is refused", "defaultMTU: \"1450\"\n",
			`antrea-agent.conf: defaultMTU: want an integer, got "1450"`},
		{"a bridge name too long is refused", "ovsBridge: a-very-long-bridge-name\n",
			`antrea-agent.conf: ovsBridge: "a-very-long-bridge-name" is longer than 15 characters`},
		{"br-phy is reserved", "ovsBridge: br-phy\n",
			`antrea-agent.conf: ovsBridge: "br-phy" is reserved`},
		{"an empty bridge name is refused", "ovsBridge: \"\"\n",
			`antrea-agent.conf: ovsBridge: must not be empty`},
		{"a gateway named as the bridge is refused", "hostGateway: br-int\n",
			`antrea-agent.conf: hostGateway: "br-int" is already the name of a bridge`},
		{"a transport interface with a slash is refused", "transportInterface: eth0/1\n",
			`antrea-agent.conf: transportInterface: "eth0/1" is not a valid interface name`},
		{"a relative socket path is refused", "cniSocket: cni.sock\n",
			`antrea-agent.conf: cniSocket: "cni.sock" is not an absolute path`},
		{"a relative OVS run dir is refused", "ovsRunDir: run\n",
			`antrea-agent.conf: ovsRunDir: "run" is not an absolute path`},
		{"an override with another scheme is refused", "kubeAPIServerOverride: ftp://x\n",
			`antrea-agent.conf: kubeAPIServerOverride: "ftp://x": scheme "ftp" is not supported`},
		{"a port out of range is refused", "apiPort: 70000\n",
			`antrea-agent.conf: apiPort: 70000 is not a port`},
		{"a service proxy name that is no label value is refused", "antreaProxy:\n  serviceProxyName: \"kube proxy\"\n",
			`antrea-agent.conf: antreaProxy.serviceProxyName: "kube proxy" is not a label value`},
		{"a health address without a port is refused", "antreaProxy:\n  healthzBindAddress: 0.0.0.0\n",
			`antrea-agent.conf: antreaProxy.healthzBindAddress: "0.0.0.0" is not IP:port`},
		{"a health address with a host name is refused", "antreaProxy:\n  healthzBindAddress: localhost:10256\n",
			`antrea-agent.conf: antreaProxy.healthzBindAddress: "localhost:10256": "localhost" is not an IP address`},
		{"a health port out of range is refused", "antreaProxy:\n  healthzBindAddress: 0.0.0.0:0\n",
			`antrea-agent.conf: antreaProxy.healthzBindAddress: "0.0.0.0:0": "0" is not a port`},
		{"nodePortAddresses that are no CIDR are refused", "antreaProxy:\n  nodePortAddresses: [10.0.0.1]\n",
			`antrea-agent.conf: antreaProxy.nodePortAddresses: "10.0.0.1" is not a CIDR`},
		{"IPv6 nodePortAddresses are refused", "antreaProxy:\n  nodePortAddresses: [fd00::/64]\n",
			`antrea-agent.conf: antreaProxy.nodePortAddresses: "fd00::/64" is not IPv4`},
		{"skipServices are refused", "antreaProxy:\n  skipServices: [kube-system/kube-dns]\n",
			`antrea-agent.conf: antreaProxy.skipServices: ["kube-system/kube-dns"] is not supported by this Antrea`},
		{"an upstream key off its default is refused", "snatFullyRandomPorts: true\n",
			`antrea-agent.conf: snatFullyRandomPorts: true is not supported by this Antrea (only false, upstream's default)`},
		{"an unknown encryption mode is refused", "trafficEncryptionMode: tls\n",
			`antrea-agent.conf: trafficEncryptionMode: "tls" is not a mode (want none, ipsec or wireGuard)`},
		{"a WireGuard port out of range is refused", "wireGuard:\n  port: 70000\n",
			`antrea-agent.conf: wireGuard.port: 70000 is not a port (want 1 to 65535)`},
		{"an IGMP query version other than 1, 2, 3 is refused", "multicast:\n  igmpQueryVersions: [3, 4]\n",
			`antrea-agent.conf: multicast.igmpQueryVersions[1]: 4 is not an IGMP version (want 1, 2 or 3)`},
		{"an IGMP query interval that is no duration is refused", "multicast:\n  igmpQueryInterval: often\n",
			`antrea-agent.conf: multicast.igmpQueryInterval: "often" is not a duration of 1s or more (such as 125s)`},
		{"multicast interfaces are refused", "multicast:\n  multicastInterfaces: [eth1]\n",
			`antrea-agent.conf: multicast.multicastInterfaces: ["eth1"] is not supported by this Antrea`},
		{"an unparsable collector address is refused", "flowExporter:\n  flowCollectorAddr: \"10.0.0.1:http:udp\"\n",
			`antrea-agent.conf: flowExporter.flowCollectorAddr: "10.0.0.1:http:udp": "http" is not a port`},
		{"a collector address without host is refused", "flowExporter:\n  flowCollectorAddr: \":4739:udp\"\n",
			`antrea-agent.conf: flowExporter.flowCollectorAddr: ":4739:udp" has no host`},
		{"an unknown collector transport is refused", "flowExporter:\n  flowCollectorAddr: \"10.0.0.1:4739:sctp\"\n",
			`antrea-agent.conf: flowExporter.flowCollectorAddr: "10.0.0.1:4739:sctp": "sctp" is not a transport (want grpc, tls, tcp or udp)`},
		{"a flow poll interval of 0 is refused", "flowExporter:\n  flowPollInterval: 0s\n",
			`antrea-agent.conf: flowExporter.flowPollInterval: "0s" is not a duration of at least 1s`},
		{"an idle timeout that is no duration is refused", "flowExporter:\n  idleFlowExportTimeout: \"15\"\n",
			`antrea-agent.conf: flowExporter.idleFlowExportTimeout: "15" is not a duration of at least 1s`},
		{"a port range that is no range is refused", "nodePortLocal:\n  portRange: \"61000\"\n",
			`antrea-agent.conf: nodePortLocal.portRange: "61000" is not a port range (want FIRST-LAST`},
		{"a port range upside down is refused", "nodePortLocal:\n  portRange: 62000-61000\n",
			`antrea-agent.conf: nodePortLocal.portRange: "62000-61000" is not a port range (want 1 <= FIRST <= LAST <= 65535)`},
		{"a port range beyond 65535 is refused", "nodePortLocal:\n  portRange: 65000-70000\n",
			`antrea-agent.conf: nodePortLocal.portRange: "65000-70000" is not a port range`},
		{"a port range overlapping the Service NodePort range is refused", "nodePortLocal:\n  enable: true\n  portRange: 32000-33000\n",
			`antrea-agent.conf: nodePortLocal.portRange: "32000-33000" overlaps the Service NodePort range 30000-32767`},
		{"a negative fqdnCacheMinTTL is refused", "fqdnCacheMinTTL: -1\n",
			`antrea-agent.conf: fqdnCacheMinTTL: -1 is negative`},
		{"a dnsServerOverride that is a name is refused", "dnsServerOverride: kube-dns.kube-system\n",
			`antrea-agent.conf: dnsServerOverride: "kube-dns.kube-system" is not an IP address, with or without a port`},
		{"a bool given as a string is refused", "tunnelCsum: \"true\"\n",
			`antrea-agent.conf: tunnelCsum: want true or false, got "true"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(FileName, []byte(tc.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got error\n  %v\nwant one starting with\n  %s", err, tc.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte("tunnelType: stt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := path + `: tunnelType: "stt" is not supported (want geneve, vxlan or gre)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.conf")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func TestProxyRunsOnlyWhenGateAndEnableAreOn(t *testing.T) {
	for _, tc := range []struct {
		name         string
		gate, enable bool
		want         bool
	}{
		{"both on", true, true, true},
		{"gate off", false, true, false},
		{"enable off", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.FeatureGates[AntreaProxy] = tc.gate
			c.AntreaProxy.Enable = tc.enable
			if got := c.ProxyEnabled(); got != tc.want {
				t.Errorf("ProxyEnabled() = %v, want %v", got, tc.want)
			}
		})
	}
}

// upstreamChartDefaults is the file upstream's chart renders with its
// default values (values only; key names and defaults of antrea-io/antrea's
// build/charts/antrea/conf/antrea-agent.conf): it must load here unchanged.
const upstreamChartDefaults = `
featureGates:
  AllAlpha: false
  AllBeta: false
  AntreaProxy: true
  TopologyAwareHints: true
  ServiceTrafficDistribution: true
  CleanupStaleUDPSvcConntrack: true
  Traceflow: true
  PacketCapture: false
  NodePortLocal: true
  AntreaPolicy: true
  FlowExporter: false
  NetworkPolicyStats: true
  Egress: true
  AntreaIPAM: false
  Multicast: true
  Multicluster: false
  SecondaryNetwork: false
  ServiceExternalIP: true
  TrafficControl: false
  IPsecCertAuth: false
  SupportBundleCollection: false
  L7NetworkPolicy: false
  LoadBalancerModeDSR: false
  EgressTrafficShaping: false
  EgressSeparateSubnet: false
  NodeNetworkPolicy: false
  L7FlowExporter: false
  NodeLatencyMonitor: false
  BGPPolicy: false
ovsBridge: "br-int"
hostGateway: "antrea-gw0"
trafficEncapMode: "encap"
noSNAT: false
snatFullyRandomPorts: false
tunnelType: "geneve"
tunnelPort: 0
tunnelCsum: false
trafficEncryptionMode: "none"
enableBridgingMode: false
disableTXChecksumOffload: false
defaultMTU: 0
packetInRate: 5000
wireGuard:
  port: 51820
egress:
  exceptCIDRs:
  maxEgressIPsPerNode: 255
  snatFullyRandomPorts:
serviceCIDR: ""
serviceCIDRv6: ""
apiPort: 10350
enablePrometheusMetrics: true
flowExporter:
  enable: false
  flowCollectorAddr: "flow-aggregator/flow-aggregator:14739:grpc"
  flowPollInterval: "5s"
  activeFlowExportTimeout: "5s"
  idleFlowExportTimeout: "15s"
nodePortLocal:
  enable: false
  portRange: "61000-62000"
kubeAPIServerOverride: ""
dnsServerOverride: ""
fqdnCacheMinTTL: 0
tlsCipherSuites: ""
tlsMinVersion: ""
transportInterface: ""
multicast:
  enable: false
  multicastInterfaces:
  igmpQueryVersions:
  - 1
  - 2
  - 3
  igmpQueryInterval: "125s"
transportInterfaceCIDRs:
antreaProxy:
  enable: true
  proxyAll: false
  nodePortAddresses:
  skipServices:
  proxyLoadBalancerIPs: true
  serviceProxyName: ""
  defaultLoadBalancerMode: "nat"
ipsec:
  authenticationMode: "psk"
multicluster:
  enableGateway: false
  namespace: ""
  enableStretchedNetworkPolicy: false
  enablePodToPodConnectivity: false
  trafficEncryptionMode: "none"
  wireGuard:
    port: 51821
auditLogging:
  maxSize: 500
  maxBackups: 3
  maxAge: 28
  compress: true
secondaryNetwork:
  ovsBridges:
`

func TestUpstreamChartFileLoads(t *testing.T) {
	got, err := Parse("upstream-antrea-agent.conf", []byte(upstreamChartDefaults))
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's defaults, but proxyAll: upstream's is false, this
	// Antrea's true (AntreaProxy replaces kube-proxy).
	want := Defaults()
	want.AntreaProxy.ProxyAll = false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestEveryKeyAndGateIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range strict.Keys(&AgentConfig{}) {
		if !strings.Contains(string(doc), "`"+k) {
			t.Errorf("docs/configuration.md does not describe key %s", k)
		}
	}
	for _, g := range spec.Gates {
		if !strings.Contains(string(doc), "`"+g.Name+"`") && !strings.Contains(string(doc), "`featureGates."+g.Name+"`") {
			t.Errorf("docs/configuration.md does not list feature gate %s", g.Name)
		}
	}
}

func TestCollectorAddressesParseAsUpstreamWrites(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CollectorAddr
	}{
		{"flow-aggregator/flow-aggregator", CollectorAddr{ServiceNamespace: "flow-aggregator", ServiceName: "flow-aggregator", Port: 4739, Transport: "tls"}},
		{"flow-aggregator/flow-aggregator:14739:grpc", CollectorAddr{ServiceNamespace: "flow-aggregator", ServiceName: "flow-aggregator", Port: 14739, Transport: "grpc"}},
		{"10.0.0.9:4739:udp", CollectorAddr{Host: "10.0.0.9", Port: 4739, Transport: "udp"}},
		{"collector.example.com::tcp", CollectorAddr{Host: "collector.example.com", Port: 4739, Transport: "tcp"}},
		{"[fd00::9]:4740:tcp", CollectorAddr{Host: "fd00::9", Port: 4740, Transport: "tcp"}},
		{"[fd00::9]", CollectorAddr{Host: "fd00::9", Port: 4739, Transport: "tls"}},
	} {
		got, err := ParseCollectorAddr(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseCollectorAddr(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestNodePortLocalRunsWithItsGateAndEnable(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		on         bool
	}{
		{"off by default (upstream's nodePortLocal.enable is false)", "", false},
		{"on with enable, the gate on by default", "nodePortLocal:\n  enable: true\n  portRange: 40000-40100\n", true},
		{"off when the gate is off", "featureGates:\n  NodePortLocal: false\nnodePortLocal:\n  enable: true\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(FileName, []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.NodePortLocalEnabled() != tc.on {
				t.Errorf("NodePortLocalEnabled() = %v, want %v", c.NodePortLocalEnabled(), tc.on)
			}
		})
	}
}

func TestTheFlowExporterRunsWithItsGateAndEnable(t *testing.T) {
	c, err := Parse(FileName, []byte("featureGates:\n  FlowExporter: true\nflowExporter:\n  enable: true\n  flowCollectorAddr: \"127.0.0.1:4739:udp\"\n  flowPollInterval: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.FlowExporterEnabled() || c.FlowExporter.Times().Poll != 2*time.Second || c.FlowExporter.Times().Idle != 15*time.Second {
		t.Fatalf("enabled %v times %+v", c.FlowExporterEnabled(), c.FlowExporter.Times())
	}
	c, err = Parse(FileName, []byte("flowExporter:\n  enable: true\n  flowCollectorAddr: \"127.0.0.1:4739:udp\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.FlowExporterEnabled() {
		t.Fatal("enabled without its feature gate")
	}
}

func TestDNSServerOverrideTakesPort53WhenItHasNone(t *testing.T) {
	for in, want := range map[string]string{"10.96.0.10": "10.96.0.10:53", "10.96.0.10:5353": "10.96.0.10:5353", "fd00::a": "[fd00::a]:53"} {
		if got, err := DNSServerAddr(in); err != nil || got != want {
			t.Errorf("DNSServerAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
