package interfacestore

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"

	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func names(cfgs []*InterfaceConfig) []string {
	out := []string{}
	for _, c := range cfgs {
		out = append(out, c.InterfaceName)
	}
	return out
}

// sampleInterfaces returns one interface of every kind, as the agent records them.
func sampleInterfaces(t testing.TB) []*InterfaceConfig {
	pod1 := NewContainerInterface("web-1a2b3c", "cid-1", "web", "ns1", "eth0",
		mustMAC(t, "0a:58:0a:0a:00:05"), []net.IP{net.ParseIP("10.10.0.5"), net.ParseIP("fd00::5")}, 0)
	pod1.OVSPortConfig = &OVSPortConfig{PortUUID: "u-pod1", OFPort: 5}
	// hostPorts (persisted in external_ids): every hostIP form, both protocols.
	pod1.PortMappings = []types.PortMapping{
		{HostPort: 54323, ContainerPort: 8080, Protocol: types.ProtocolTCP, HostIP: netip.MustParseAddr("127.0.0.1")},
		{HostPort: 54323, ContainerPort: 8081, Protocol: types.ProtocolUDP, HostIP: netip.MustParseAddr("172.30.0.11")},
		{HostPort: 80, ContainerPort: 80, Protocol: types.ProtocolTCP},
	}
	pod2 := NewContainerInterface("db-4d5e6f", "cid-2", "db", "ns2", "eth0",
		mustMAC(t, "0a:58:0a:0a:00:06"), []net.IP{net.ParseIP("10.10.0.6")}, 10)
	pod2.OVSPortConfig = &OVSPortConfig{PortUUID: "u-pod2", OFPort: 6}
	gw := NewGatewayInterface("antrea-gw0", mustMAC(t, "0a:00:00:00:00:01"), []net.IP{net.ParseIP("10.10.0.1")})
	gw.OVSPortConfig = &OVSPortConfig{PortUUID: "u-gw", OFPort: 2}
	tun := NewTunnelInterface("antrea-tun0", ovsconfig.GeneveTunnel, nil, true)
	tun.OVSPortConfig = &OVSPortConfig{PortUUID: "u-tun", OFPort: 1}
	return []*InterfaceConfig{pod1, pod2, gw, tun}
}

func TestStoreAnswersLookupsByEveryKey(t *testing.T) {
	s := NewInterfaceStore()
	s.Initialize(sampleInterfaces(t))

	tests := []struct {
		name   string
		lookup func() (*InterfaceConfig, bool)
		want   string // "" means not found
	}{
		{"a name finds its interface", func() (*InterfaceConfig, bool) { return s.GetInterfaceByName("antrea-gw0") }, "antrea-gw0"},
		{"a container ID finds the pod interface", func() (*InterfaceConfig, bool) { return s.GetContainerInterface("cid-2") }, "db-4d5e6f"},
		{"an OpenFlow port finds the tunnel", func() (*InterfaceConfig, bool) { return s.GetInterfaceByOFPort(1) }, "antrea-tun0"},
		{"an IPv4 address finds the pod", func() (*InterfaceConfig, bool) { return s.GetInterfaceByIP("10.10.0.5") }, "web-1a2b3c"},
		{"an IPv6 address in another spelling finds the pod", func() (*InterfaceConfig, bool) { return s.GetInterfaceByIP("fd00:0::5") }, "web-1a2b3c"},
		{"the gateway IP finds the gateway", func() (*InterfaceConfig, bool) { return s.GetInterfaceByIP("10.10.0.1") }, "antrea-gw0"},
		{"an unknown name finds nothing", func() (*InterfaceConfig, bool) { return s.GetInterfaceByName("nope") }, ""},
		{"an unknown container finds nothing", func() (*InterfaceConfig, bool) { return s.GetContainerInterface("cid-9") }, ""},
		{"an unused OpenFlow port finds nothing", func() (*InterfaceConfig, bool) { return s.GetInterfaceByOFPort(99) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.lookup()
			if tc.want == "" {
				if ok {
					t.Fatalf("found %s, want nothing", got.InterfaceName)
				}
				return
			}
			if !ok || got.InterfaceName != tc.want {
				t.Fatalf("got %v (found %v), want %s", got, ok, tc.want)
			}
		})
	}
	if got := names(s.GetContainerInterfacesByPod("web", "ns1")); !reflect.DeepEqual(got, []string{"web-1a2b3c"}) {
		t.Errorf("pod ns1/web interfaces = %v", got)
	}
	if got := names(s.GetContainerInterfacesByPod("web", "ns2")); len(got) != 0 {
		t.Errorf("pod ns2/web should have no interfaces, got %v", got)
	}
	if got := names(s.GetInterfacesByType(ContainerInterface)); !reflect.DeepEqual(got, []string{"db-4d5e6f", "web-1a2b3c"}) {
		t.Errorf("container interfaces = %v", got)
	}
	if s.Len() != 4 || s.GetContainerInterfaceNum() != 2 {
		t.Errorf("Len = %d, containers = %d; want 4 and 2", s.Len(), s.GetContainerInterfaceNum())
	}
}

func TestDeletingOrReplacingAnInterfaceUpdatesEveryIndex(t *testing.T) {
	s := NewInterfaceStore()
	s.Initialize(sampleInterfaces(t))
	web, _ := s.GetInterfaceByName("web-1a2b3c")
	s.DeleteInterface(web)
	if _, ok := s.GetContainerInterface("cid-1"); ok {
		t.Error("deleted pod still found by container ID")
	}
	if _, ok := s.GetInterfaceByIP("10.10.0.5"); ok {
		t.Error("deleted pod still found by IP")
	}
	if _, ok := s.GetInterfaceByOFPort(5); ok {
		t.Error("deleted pod still found by OpenFlow port")
	}
	if len(s.GetContainerInterfacesByPod("web", "ns1")) != 0 {
		t.Error("deleted pod still found by pod name")
	}

	// Re-adding db on a new port and IP drops the old keys.
	db, _ := s.GetInterfaceByName("db-4d5e6f")
	db.OFPort = 7
	db.IPs = []net.IP{net.ParseIP("10.10.0.7")}
	s.AddInterface(db)
	if _, ok := s.GetInterfaceByOFPort(6); ok {
		t.Error("old OpenFlow port 6 still maps to db")
	}
	if _, ok := s.GetInterfaceByIP("10.10.0.6"); ok {
		t.Error("old IP still maps to db")
	}
	if got, ok := s.GetInterfaceByOFPort(7); !ok || got.InterfaceName != "db-4d5e6f" {
		t.Errorf("OpenFlow port 7 = %v, %v", got, ok)
	}
}

func TestReturnedInterfacesAreCopiesTheCallerMayChange(t *testing.T) {
	s := NewInterfaceStore()
	s.Initialize(sampleInterfaces(t))
	got, _ := s.GetInterfaceByName("web-1a2b3c")
	got.PodName = "changed"
	got.IPs[0][15] = 99
	again, _ := s.GetInterfaceByName("web-1a2b3c")
	if again.PodName != "web" || again.IPs[0].String() != "10.10.0.5" {
		t.Errorf("store changed through a returned value: %+v %v", again.ContainerInterfaceConfig, again.IPs)
	}
}

func TestConcurrentReadersAndWritersKeepTheStoreConsistent(t *testing.T) {
	s := NewInterfaceStore()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				cfg := NewContainerInterface("p"+string(rune('a'+w)), "c"+string(rune('a'+w)), "pod", "ns", "eth0", nil,
					[]net.IP{net.IPv4(10, 0, byte(w), byte(i))}, 0)
				cfg.OVSPortConfig = &OVSPortConfig{OFPort: int32(1000*w + i + 1)}
				s.AddInterface(cfg)
				_, _ = s.GetInterfaceByOFPort(int32(1000*w + i))
				_ = s.GetContainerInterfacesByPod("pod", "ns")
				if i%3 == 0 {
					s.DeleteInterface(cfg)
				}
			}
		}(w)
	}
	wg.Wait()
	// Each writer ended with i=199 (not deleted): one interface each, indexed once.
	if s.Len() != 4 || len(s.GetContainerInterfacesByPod("pod", "ns")) != 4 {
		t.Fatalf("Len = %d, pod interfaces = %d; want 4 and 4", s.Len(), len(s.GetContainerInterfacesByPod("pod", "ns")))
	}
	for w := 0; w < 4; w++ {
		if got, ok := s.GetInterfaceByOFPort(int32(1000*w + 200)); !ok || got.InterfaceName != "p"+string(rune('a'+w)) {
			t.Errorf("writer %d's last port: %v %v", w, got, ok)
		}
	}
}

func TestExternalIDsRoundTripEveryInterfaceKind(t *testing.T) {
	for _, want := range sampleInterfaces(t) {
		t.Run(want.Type.String()+" "+want.InterfaceName, func(t *testing.T) {
			port := ovsconfig.OVSPortData{
				UUID: want.PortUUID, Name: want.InterfaceName, IFName: want.InterfaceName,
				OFPort: want.OFPort, ExternalIDs: BuildOVSPortExternalIDs(want),
			}
			if want.TunnelInterfaceConfig != nil {
				port.IFType = string(want.TunnelInterfaceConfig.Type)
				port.Options = ovsconfig.TunnelOptions(ovsconfig.TunnelConfig{CSum: want.CSum})
			}
			got, err := InterfaceConfigFromOVSPort(port)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestPortsTheAgentDoesNotManageAreSkippedAndBadOnesReported(t *testing.T) {
	tests := []struct {
		name    string
		port    ovsconfig.OVSPortData
		wantNil bool
		wantErr string
	}{
		{name: "a bridge's local port is not managed", port: ovsconfig.OVSPortData{Name: "br-int", IFType: "internal"}, wantNil: true},
		{name: "an unknown antrea-type names the port", port: ovsconfig.OVSPortData{Name: "x1", ExternalIDs: map[string]string{ExternalIDType: "weird"}}, wantErr: `port x1: bad antrea-type "weird"`},
		{name: "a bad IP names the port", port: ovsconfig.OVSPortData{Name: "x2", ExternalIDs: map[string]string{ExternalIDType: "container", ExternalIDIP: "10.0.0.300"}}, wantErr: `port x2: bad IP "10.0.0.300"`},
		{name: "a bad MAC names the port", port: ovsconfig.OVSPortData{Name: "x3", ExternalIDs: map[string]string{ExternalIDType: "gateway", ExternalIDMAC: "zz"}}, wantErr: `port x3: bad attached-mac "zz"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InterfaceConfigFromOVSPort(tc.port)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || (got == nil) != tc.wantNil {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}
