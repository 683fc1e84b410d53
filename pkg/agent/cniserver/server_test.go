package cniserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"antrea.io/antrea/pkg/agent/interfacestore"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// fakeOVS keeps ports in memory (the unit tests' stand-in for OVSDB).
type fakeOVS struct {
	mu    sync.Mutex
	ports map[string]ovsconfig.OVSPortData
}

func (f *fakeOVS) CreatePort(_ context.Context, name string, ids map[string]string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ports == nil {
		f.ports = map[string]ovsconfig.OVSPortData{}
	}
	uuid := "uuid-" + name
	f.ports[name] = ovsconfig.OVSPortData{UUID: uuid, Name: name, OFPort: int32(len(f.ports) + 1), ExternalIDs: ids}
	return uuid, nil
}

func (f *fakeOVS) DeletePort(_ context.Context, uuid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, p := range f.ports {
		if p.UUID == uuid {
			delete(f.ports, n)
			return nil
		}
	}
	return fmt.Errorf("port %s: %w", uuid, ovsconfig.ErrNotFound)
}

func (f *fakeOVS) GetOFPort(ctx context.Context, name string) (int32, error) {
	p, err := f.GetPortData(ctx, name)
	if err != nil {
		return 0, err
	}
	return p.OFPort, nil
}

func (f *fakeOVS) GetPortData(_ context.Context, name string) (*ovsconfig.OVSPortData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[name]
	if !ok {
		return nil, fmt.Errorf("port %s: %w", name, ovsconfig.ErrNotFound)
	}
	return &p, nil
}

func (f *fakeOVS) GetPortList(context.Context) ([]ovsconfig.OVSPortData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ovsconfig.OVSPortData
	for _, p := range f.ports {
		out = append(out, p)
	}
	return out, nil
}

// fakeFlows records which ports have flows.
type fakeFlows struct {
	mu        sync.Mutex
	installed map[string]uint32
	uninstall []string
}

func (f *fakeFlows) InstallPodFlows(ifName string, _ []net.IP, _ net.HardwareAddr, ofPort uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.installed == nil {
		f.installed = map[string]uint32{}
	}
	f.installed[ifName] = ofPort
	return nil
}

func (f *fakeFlows) UninstallPodFlows(ifName string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.installed, ifName)
	f.uninstall = append(f.uninstall, ifName)
	return nil
}

func (f *fakeFlows) PodFlowsInstalled(ifName string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.installed[ifName]
	return ok
}

func newTestServer(t *testing.T, ovs *fakeOVS) *Server {
	t.Helper()
	_, cidr, _ := net.ParseCIDR("10.9.0.0/24")
	s, err := New(Config{NodeName: "n1", PodCIDRs: []*net.IPNet{cidr}, IPAMDataDir: t.TempDir(), ReadyTimeout: 50 * time.Millisecond,
		SocketPath: "/run/antrea-test/cni.sock", DNS: typesDNS()}, Deps{OVS: ovs, Flows: &fakeFlows{}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func confBytes(version string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":"antrea","type":"antrea"}`, version))
}

func req(containerID, netns, ifName, args string, conf []byte) *cnipb.CniCmdRequest {
	return &cnipb.CniCmdRequest{CniArgs: &cnipb.CniCmdArgs{ContainerId: containerID, Netns: netns, Ifname: ifName, Args: args, NetworkConfiguration: conf}}
}

const podArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1"

func TestRequestsAreRejectedWithTheCodeAndTheNameOfTheFieldAtFault(t *testing.T) {
	netns := t.TempDir() // any existing path passes the netns check
	full := validation{needNetns: true, needContainer: true, needPod: true}
	for _, tc := range []struct {
		name string
		req  *cnipb.CniCmdRequest
		code cnipb.ErrorCode
		want string
	}{
		{"no arguments at all", &cnipb.CniCmdRequest{}, cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "cni_args"},
		{"a configuration that is not JSON", req("c", netns, "eth0", podArgs, []byte("{")), cnipb.ErrorCode_DECODING_FAILURE, "network configuration"},
		{"no cniVersion", req("c", netns, "eth0", podArgs, []byte(`{"name":"antrea"}`)), cnipb.ErrorCode_INVALID_NETWORK_CONFIG, "cniVersion"},
		{"an unsupported cniVersion", req("c", netns, "eth0", podArgs, confBytes("0.2.0")), cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION, `cniVersion "0.2.0"`},
		{"no network name", req("c", netns, "eth0", podArgs, []byte(`{"cniVersion":"1.0.0"}`)), cnipb.ErrorCode_INVALID_NETWORK_CONFIG, "name is missing"},
		{"no container ID", req("", netns, "eth0", podArgs, confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_CONTAINERID"},
		{"an interface name with a slash", req("c", netns, "eth/0", podArgs, confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_IFNAME"},
		{"an interface name of 16 bytes", req("c", netns, "eth0123456789abc", podArgs, confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_IFNAME"},
		{"no netns", req("c", "", "eth0", podArgs, confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_NETNS is empty"},
		{"a netns that does not exist", req("c", netns+"/nope", "eth0", podArgs, confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_NETNS"},
		{"malformed CNI_ARGS", req("c", netns, "eth0", "K8S_POD_NAME", confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_ARGS"},
		{"no pod namespace", req("c", netns, "eth0", "K8S_POD_NAME=p", confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "K8S_POD_NAMESPACE"},
		{"no pod name", req("c", netns, "eth0", "K8S_POD_NAMESPACE=n", confBytes("1.0.0")), cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "K8S_POD_NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequest(tc.req, full)
			pe := toProto(err)
			if err == nil || pe.Code != tc.code || !strings.Contains(pe.Message, tc.want) {
				t.Errorf("parseRequest = %v, want code %v naming %q", err, tc.code, tc.want)
			}
		})
	}
	t.Run("a valid request of every supported version", func(t *testing.T) {
		for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
			r, err := parseRequest(req("c", netns, "eth0", podArgs, confBytes(v)), full)
			if err != nil || r.PodNamespace != "ns1" || r.PodName != "p1" {
				t.Errorf("version %s: %+v, %v", v, r, err)
			}
		}
	})
}

func TestHostInterfaceNamesAreShortReadableAndUniquePerSandbox(t *testing.T) {
	a := hostInterfaceName("default", "coredns-7db6d8ff4d-abcde", "c1")
	if len(a) > 15 || !strings.HasPrefix(a, "coredns-") {
		t.Errorf("name %q: want at most 15 bytes starting with the pod name", a)
	}
	if a != hostInterfaceName("default", "coredns-7db6d8ff4d-abcde", "c1") {
		t.Error("the name is not deterministic")
	}
	for _, other := range []string{
		hostInterfaceName("default", "coredns-7db6d8ff4d-abcde", "c2"),
		hostInterfaceName("kube-system", "coredns-7db6d8ff4d-abcde", "c1"),
	} {
		if other == a {
			t.Errorf("%q collides with a name of another sandbox", other)
		}
	}
	if n := hostInterfaceName("ns", "a", "c"); !strings.HasPrefix(n, "a-") || len(n) != 8 {
		t.Errorf("short pod name gives %q", n)
	}
	if err := validateIfName(hostInterfaceName("ns", "x:y/z", "c")); err != nil {
		t.Errorf("name from an odd pod name is not a valid interface name: %v", err)
	}
}

func TestTheConfListIsWhatLibcniReadsAndNamesTheAgentSocket(t *testing.T) {
	s := newTestServer(t, &fakeOVS{})
	dir := filepath.Join(t.TempDir(), "net.d")
	if err := s.WriteConfList(dir); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromFile(filepath.Join(dir, ConfListName))
	if err != nil {
		t.Fatal(err)
	}
	if list.CNIVersion != "1.1.0" || list.Name != "antrea" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "antrea" {
		t.Errorf("conflist = %+v", list)
	}
	var plugin map[string]any
	if err := json.Unmarshal(list.Plugins[0].Bytes, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin["agentSocket"] != "/run/antrea-test/cni.sock" {
		t.Errorf("agentSocket = %v", plugin["agentSocket"])
	}
	// The runtime passes hostPorts only to a plugin that declares them.
	if c, _ := plugin["capabilities"].(map[string]any); c["portMappings"] != true {
		t.Errorf("capabilities = %v, want portMappings", plugin["capabilities"])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the conflist", len(entries))
	}
}

func TestStatusIsNotAvailableUntilReady(t *testing.T) {
	s := newTestServer(t, &fakeOVS{})
	r := req("", "", "", "", confBytes("1.1.0"))
	resp, _ := s.CmdStatus(context.Background(), r)
	if resp.GetError().GetCode() != cnipb.ErrorCode_PLUGIN_NOT_AVAILABLE {
		t.Errorf("STATUS before ready = %v, want PLUGIN_NOT_AVAILABLE", resp.GetError())
	}
	s.SetReady()
	s.SetReady() // twice is fine
	if resp, _ := s.CmdStatus(context.Background(), r); resp.GetError() != nil {
		t.Errorf("STATUS when ready = %v", resp.GetError())
	}
}

func TestAddBeforeReadyWaitsBoundedThenSaysTryAgainLater(t *testing.T) {
	s := newTestServer(t, &fakeOVS{})
	resp, _ := s.CmdAdd(context.Background(), req("c1", t.TempDir(), "eth0", podArgs, confBytes("1.0.0")))
	if resp.GetError().GetCode() != cnipb.ErrorCode_TRY_AGAIN_LATER {
		t.Errorf("ADD before ready = %v, want TRY_AGAIN_LATER", resp.GetError())
	}
}

func TestDelOfAnUnknownPodReleasesNothingAndSucceeds(t *testing.T) {
	ovs := &fakeOVS{}
	s := newTestServer(t, ovs)
	flows := s.flows.(*fakeFlows)
	for i := 0; i < 2; i++ {
		resp, _ := s.CmdDel(context.Background(), req("c1", "/var/run/netns/gone", "eth0", podArgs, confBytes("1.0.0")))
		if resp.GetError() != nil {
			t.Fatalf("DEL %d = %v", i, resp.GetError())
		}
	}
	// Without pod arguments DEL cannot name the port, and still succeeds.
	if resp, _ := s.CmdDel(context.Background(), req("c2", "", "eth0", "", confBytes("1.0.0"))); resp.GetError() != nil {
		t.Errorf("DEL without pod args = %v", resp.GetError())
	}
	if want := hostInterfaceName("ns1", "p1", "c1"); len(flows.uninstall) != 2 || flows.uninstall[0] != want {
		t.Errorf("UninstallPodFlows calls = %v, want twice %s", flows.uninstall, want)
	}
}

func TestPodInterfacesAreRecoveredFromThePortsExternalIDs(t *testing.T) {
	ovs := &fakeOVS{}
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	pod := interfacestore.NewContainerInterface("p1-abcdef", "c1", "p1", "ns1", "eth0", mac, []net.IP{net.ParseIP("10.9.0.7")}, 0)
	_, _ = ovs.CreatePort(context.Background(), "p1-abcdef", interfacestore.BuildOVSPortExternalIDs(pod))
	_, _ = ovs.CreatePort(context.Background(), "antrea-gw0", interfacestore.BuildOVSPortExternalIDs(interfacestore.NewGatewayInterface("antrea-gw0", mac, nil)))
	s := newTestServer(t, ovs)
	if err := s.rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.ifaces.GetContainerInterfaceNum(); n != 1 {
		t.Fatalf("recovered %d pod interfaces, want 1 (the gateway is not a pod)", n)
	}
	cfg := s.lookup("c1", "eth0")
	if cfg == nil || cfg.InterfaceName != "p1-abcdef" || cfg.MAC.String() != "02:00:00:00:00:01" || cfg.OFPort <= 0 {
		t.Fatalf("recovered %+v", cfg)
	}
	ips := s.ipConfigs(cfg.IPs)
	if len(ips) != 1 || ips[0].Address.String() != "10.9.0.7/24" || ips[0].Gateway.String() != "10.9.0.1" {
		t.Errorf("addresses of the recovered interface: %v", ips)
	}
	if s.lookup("c1", "net1") != nil {
		t.Error("lookup of another interface of the container found eth0")
	}
}

func TestResultsAreConvertedToTheRequestedVersion(t *testing.T) {
	s := newTestServer(t, &fakeOVS{})
	mac, _ := net.ParseMAC("02:00:00:00:00:05")
	cfg := interfacestore.NewContainerInterface("p-1", "c1", "p", "ns", "eth0", mac, []net.IP{net.ParseIP("10.9.0.5")}, 0)
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		out, err := s.result(&request{IfName: "eth0", Netns: "/x", Conf: netConf{NetConf: netConfOf(v)}}, cfg, s.ipConfigs(cfg.IPs), mac)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		if m["cniVersion"] != v || !strings.Contains(string(out), "10.9.0.5/24") || !strings.Contains(string(out), "10.0.0.10") ||
			!strings.Contains(string(out), `"gateway":"10.9.0.1"`) {
			t.Errorf("%s result: %s", v, out)
		}
	}
}

func TestCheckComparesTheRuntimesCachedResultWithThePod(t *testing.T) {
	cfg := interfacestore.NewContainerInterface("p-1", "c1", "p", "ns", "eth0", nil, []net.IP{net.ParseIP("10.9.0.5")}, 0)
	for _, tc := range []struct {
		name, prev string
		problems   int
	}{
		{"no prevResult", "", 0},
		{"the same address", `{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.5/24"}]}`, 0},
		{"another address", `{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.6/24"}]}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea"%s}`, map[bool]string{true: "", false: `,"prevResult":` + tc.prev}[tc.prev == ""])
			var nc netConf
			if err := json.Unmarshal([]byte(conf), &nc); err != nil {
				t.Fatal(err)
			}
			if got := prevResultProblems(&nc.NetConf, cfg); len(got) != tc.problems {
				t.Errorf("problems = %v, want %d", got, tc.problems)
			}
		})
	}
}

func TestTheGatewayIsTheFirstAddressOfEachPodCIDRHoweverItIsWritten(t *testing.T) {
	cidrs := []*net.IPNet{
		{IP: net.ParseIP("10.9.3.0"), Mask: net.CIDRMask(24, 32)}, // a 16-byte IPv4 address
		{IP: net.ParseIP("fd00:9::"), Mask: net.CIDRMask(64, 128)},
	}
	s, err := New(Config{PodCIDRs: cidrs, IPAMDataDir: t.TempDir()}, Deps{OVS: &fakeOVS{}, Flows: &fakeFlows{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.gateways) != 2 || s.gateways[0].String() != "10.9.3.1" || s.gateways[1].String() != "fd00:9::1" {
		t.Errorf("gateways = %v", s.gateways)
	}
}
