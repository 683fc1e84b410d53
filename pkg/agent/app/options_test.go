package app

import (
	"flag"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodeportlocal"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// parse runs what cmd/antrea-agent runs: flags, then Complete.
func parse(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	t.Setenv("NODE_NAME", "n1")
	o := NewOptions()
	fs := flag.NewFlagSet("antrea-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.Complete(fs)
}

func writeConf(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "antrea-agent.conf")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOptionsWithoutConfigAreUpstreamDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		NodeName: "n1", OVSBridge: "br-int", HostGateway: "antrea-gw0", OVSRunDir: "/var/run/openvswitch",
		DatapathType: "system", TrafficEncapMode: "encap", TrafficEncryptionMode: "none", TunnelType: "geneve", CNISocket: "/var/run/antrea/cni.sock",
		IPAMDataDir: "/var/lib/antrea/ipam", EnableProxy: true, ProxyAll: true,
		WireGuardPort: 51820, WireGuardKeyFile: "/var/lib/antrea/wireguard/private.key",
		ProxyHealthzAddress: netip.MustParseAddrPort("0.0.0.0:10256"),
		APIPort:             10350, ClusterPort: 10351, EnablePrometheusMetrics: true, FeatureGates: map[string]bool{"AntreaProxy": true, "NetworkPolicyStats": true, "FlowExporter": false, "PacketCapture": false, "NodeLatencyMonitor": false, "NodeNetworkPolicy": false, "BGPPolicy": false, "Egress": true, "ServiceExternalIP": true, "EgressTrafficShaping": false, "NodePortLocal": true, "SupportBundleCollection": false, "TrafficControl": false, "Multicast": true, "L7NetworkPolicy": false},
		StatsInterval: time.Minute,
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("\n got %+v\nwant %+v", o, want)
	}
	if o.CNIConfDir != "" {
		t.Errorf("CNIConfDir = %q by default, want none (install-cni writes the conflist)", o.CNIConfDir)
	}
}

func TestOptionsFromConfigFile(t *testing.T) {
	conf := writeConf(t, `
featureGates:
  AntreaProxy: false
  NetworkPolicyStats: false
statsCollectionInterval: 5s
cniSocket: /run/antrea/cni.sock
clientConnection:
  kubeconfig: /etc/antrea/kubeconfig
ovsBridge: br-x
ovsDatapathType: netdev
ovsRunDir: /run/ovs
hostGateway: gw-x
tunnelType: vxlan
tunnelCsum: true
trafficEncapMode: NOENCAP
wireGuard:
  port: 51999
noSNAT: true
defaultMTU: 1400
transportInterface: eth1
kubeAPIServerOverride: https://10.0.0.1:6443
antreaProxy:
  proxyAll: true
  nodePortAddresses: [192.168.77.0/24]
  healthzBindAddress: 127.0.0.1:10257
apiPort: 10360
clusterPort: 10361
enablePrometheusMetrics: false
nodePortLocal:
  enable: true
  portRange: 40000-40999
`)
	for _, tc := range []struct {
		name string
		args []string
		want func(o *Options)
	}{
		{name: "every key of the file maps to its option", want: func(*Options) {}},
		{name: "an explicit flag overrides the file",
			args: []string{"--tunnel-type=geneve", "--uplink=eth0", "--ovs-datapath=system", "--mtu=0", "--enable-proxy=true", "--proxy-all=false"},
			want: func(o *Options) {
				o.TunnelType, o.UplinkName, o.DatapathType, o.MTU, o.EnableProxy, o.ProxyAll = "geneve", "eth0", "system", 0, true, false
			}},
		{name: "an explicit flag equal to its default still overrides the file",
			args: []string{"--kubeconfig=", "--cni-socket=/var/run/antrea/cni.sock", "--ovs-run-dir=/var/run/openvswitch"},
			want: func(o *Options) {
				o.Kubeconfig, o.CNISocket, o.OVSRunDir = "", "/var/run/antrea/cni.sock", "/var/run/openvswitch"
			}},
		{name: "--traffic-encap-mode overrides the file, in any case",
			args: []string{"--traffic-encap-mode=ENCAP"},
			want: func(o *Options) { o.TrafficEncapMode = "encap" }},
		{name: "hybrid is a mode, in any case",
			args: []string{"--traffic-encap-mode=Hybrid"},
			want: func(o *Options) { o.TrafficEncapMode = "hybrid" }},
		{name: "flags the file has no key for keep their value",
			args: []string{"--node-name=n2", "--cni-conf-dir=/etc/cni/net.d", "--ipam-data-dir=/x"},
			want: func(o *Options) { o.NodeName, o.CNIConfDir, o.IPAMDataDir = "n2", "/etc/cni/net.d", "/x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, append([]string{"--config=" + conf}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			want := Options{
				ConfigFile: conf, Kubeconfig: "/etc/antrea/kubeconfig", KubeAPIServerOverride: "https://10.0.0.1:6443",
				NodeName: "n1", OVSBridge: "br-x", HostGateway: "gw-x", OVSRunDir: "/run/ovs", DatapathType: "netdev",
				TunnelType: "vxlan", TunnelCsum: true, UplinkName: "eth1", CNISocket: "/run/antrea/cni.sock",
				TrafficEncapMode: "noEncap", TrafficEncryptionMode: "none", NoSNAT: true,
				WireGuardPort: 51999, WireGuardKeyFile: "/var/lib/antrea/wireguard/private.key",
				IPAMDataDir: "/var/lib/antrea/ipam", MTU: 1400, EnableProxy: false,
				ProxyAll: true, NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("192.168.77.0/24")},
				ProxyHealthzAddress: netip.MustParseAddrPort("127.0.0.1:10257"),
				NodePortLocal:       &nodeportlocal.PortRange{First: 40000, Last: 40999},
				APIPort:             10360, ClusterPort: 10361, EnablePrometheusMetrics: false, FeatureGates: map[string]bool{"AntreaProxy": false, "NetworkPolicyStats": false, "FlowExporter": false, "PacketCapture": false, "NodeLatencyMonitor": false, "NodeNetworkPolicy": false, "BGPPolicy": false, "Egress": true, "ServiceExternalIP": true, "EgressTrafficShaping": false, "NodePortLocal": true, "SupportBundleCollection": false, "TrafficControl": false, "Multicast": true, "L7NetworkPolicy": false},
			}
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestAnEmptyHealthzBindAddressServesNoHealthPort(t *testing.T) {
	conf := writeConf(t, "antreaProxy:\n  healthzBindAddress: \"\"\n")
	o, err := parse(t, "--config="+conf)
	if err != nil {
		t.Fatal(err)
	}
	if o.ProxyHealthzAddress.IsValid() {
		t.Errorf("ProxyHealthzAddress = %v with healthzBindAddress \"\", want none", o.ProxyHealthzAddress)
	}
}

func TestABadHealthzBindAddressIsRefusedAtStartNamingTheKey(t *testing.T) {
	conf := writeConf(t, "antreaProxy:\n  healthzBindAddress: localhost:10256\n")
	_, err := parse(t, "--config="+conf)
	if err == nil || !strings.Contains(err.Error(), `antrea-agent.conf: antreaProxy.healthzBindAddress: "localhost:10256"`) {
		t.Errorf("got %v, want an error naming antreaProxy.healthzBindAddress", err)
	}
}

func TestABadConfigFileFailsNamingTheKey(t *testing.T) {
	conf := writeConf(t, "tunnelType: stt\n")
	_, err := parse(t, "--config="+conf)
	if err == nil || !strings.Contains(err.Error(), `antrea-agent.conf: tunnelType: "stt" is not supported`) {
		t.Errorf("got %v, want an error naming tunnelType", err)
	}
}

func TestNodeInternalIPPrefersIPv4(t *testing.T) {
	node := func(addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Addresses: addrs}}
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"no address gives none", node(), "<nil>"},
		{"an ExternalIP is not used", node(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}), "<nil>"},
		{"the IPv4 InternalIP wins over an earlier IPv6 one", node(
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::2"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}), "10.0.0.2"},
		{"an IPv6-only node gives its IPv6 InternalIP", node(
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::2"}), "fd00::2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeInternalIP(tc.node).String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRecordedUplinkIsTheUplinkPortOfBrPhy(t *testing.T) {
	uplinkIDs := interfacestore.BuildOVSPortExternalIDs(interfacestore.NewUplinkInterface("eth0", nil, nil))
	ports := []ovsconfig.OVSPortData{
		{Name: "br-phy"},
		{Name: "eth0", ExternalIDs: uplinkIDs},
	}
	if got := recordedUplink(ports); got != "eth0" {
		t.Errorf("got %q, want eth0", got)
	}
	if got := recordedUplink(ports[:1]); got != "" {
		t.Errorf("without an uplink port: got %q, want none", got)
	}
}

func TestLinkWithIPFindsTheLinkHoldingTheAddress(t *testing.T) {
	got, err := linkWithIP(net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if got != "lo" {
		t.Errorf("127.0.0.1 is on %q, want lo", got)
	}
	if got, err := linkWithIP(net.ParseIP("192.0.2.201")); got != "" || err != nil {
		t.Errorf("an address nowhere: got %q, %v; want none", got, err)
	}
}

func TestTheFlowExporterIsOffByDefaultAndOnWithItsGateAndKey(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.FlowExporter != nil {
		t.Fatalf("FlowExporter on by default: %+v", o.FlowExporter)
	}
	o, err = parse(t, "--config", writeConf(t, "featureGates:\n  FlowExporter: true\nflowExporter:\n  enable: true\n"+
		"  flowCollectorAddr: \"10.0.0.9::udp\"\n  flowPollInterval: 2s\n  idleFlowExportTimeout: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &FlowExporterOptions{Collector: agentconfig.CollectorAddr{Host: "10.0.0.9", Port: 4739, Transport: "udp"},
		Poll: 2 * time.Second, Active: 5 * time.Second, Idle: 30 * time.Second}
	if !reflect.DeepEqual(o.FlowExporter, want) {
		t.Fatalf("FlowExporter %+v, want %+v", o.FlowExporter, want)
	}
}

// Multicast runs with its gate (on by default) and multicast.enable, with
// the file's query versions and interval; the gate off keeps it off.
func TestMulticastRunsWithItsGateAndEnable(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       *MulticastOptions
	}{
		{"off by default", "", nil},
		{"on with multicast.enable", "multicast:\n  enable: true\n  igmpQueryVersions: [3]\n  igmpQueryInterval: 30s\n",
			&MulticastOptions{QueryVersions: []int{3}, QueryInterval: 30 * time.Second}},
		{"off when the gate is off", "featureGates:\n  Multicast: false\nmulticast:\n  enable: true\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, "--config", writeConf(t, tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Multicast, tc.want) {
				t.Errorf("Multicast = %+v, want %+v", o.Multicast, tc.want)
			}
		})
	}
}
