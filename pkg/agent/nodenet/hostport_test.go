package nodenet

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

// fakeHostPorts is the feature on knftables' fake (the nft process
// boundary) and a scratch /proc/sys holding the gateway's route_localnet.
func fakeHostPorts(t *testing.T) (*HostPorts, *knftables.Fake, string) {
	t.Helper()
	procSys := t.TempDir()
	conf := filepath.Join(procSys, "net/ipv4/conf/antrea-gw0")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "route_localnet"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := knftables.NewFake(TableFamily, TableName)
	return NewWith(fake).HostPorts(HostPortConfig{GatewayName: "antrea-gw0", ProcSys: procSys}), fake, filepath.Join(conf, "route_localnet")
}

func pm(proto uint8, hostIP string, hostPort, containerPort uint16) types.PortMapping {
	m := types.PortMapping{Protocol: proto, HostPort: hostPort, ContainerPort: containerPort}
	if hostIP != "" {
		m.HostIP = netip.MustParseAddr(hostIP)
	}
	return m
}

func dnatRules(t *testing.T, fake *knftables.Fake) []string {
	t.Helper()
	rules, err := fake.ListRules(context.Background(), hostPortDNAT)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rules {
		out = append(out, r.Rule)
	}
	return out
}

func TestHostPortsDNATEveryFormToThePod(t *testing.T) {
	h, fake, localnet := fakeHostPorts(t)
	// An agent starting on a node without hostPorts leaves the sysctl alone.
	if err := h.Restore(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(localnet); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("route_localnet of the gateway is %q without any hostPort, want the default 0", b)
	}
	pod := PodHostPorts{Pod: "ns/web", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.5")}, Mappings: []types.PortMapping{
		pm(types.ProtocolTCP, "", 8080, 80),
		pm(types.ProtocolTCP, "172.30.0.11", 54323, 81),
		pm(types.ProtocolUDP, "172.30.0.11", 54323, 82),
		pm(types.ProtocolTCP, "127.0.0.1", 54324, 83),
	}}
	if err := h.Add(context.Background(), "c1/eth0", pod); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"meta nfproto ipv4 fib daddr type local tcp dport 8080 dnat ip to 10.10.0.5:80",
		"meta nfproto ipv4 ip daddr 172.30.0.11 tcp dport 54323 dnat ip to 10.10.0.5:81",
		"meta nfproto ipv4 ip daddr 172.30.0.11 udp dport 54323 dnat ip to 10.10.0.5:82",
		"meta nfproto ipv4 ip daddr 127.0.0.1 tcp dport 54324 dnat ip to 10.10.0.5:83",
	}
	if got := dnatRules(t, fake); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("DNAT rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, _ := os.ReadFile(localnet); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("route_localnet of the gateway is %q, want 1", b)
	}
	dump := fake.Dump()
	for _, s := range []string{"hostport-prerouting { type nat hook prerouting priority -100", "hostport-output { type nat hook output priority -100",
		`ip saddr 127.0.0.0/8 oifname "antrea-gw0" ct status dnat masquerade`, `iifname != "lo" ip daddr 127.0.0.0/8 ct state new drop`} {
		if !strings.Contains(dump, s) {
			t.Errorf("table lacks %q:\n%s", s, dump)
		}
	}
}

func TestHostPortsRefuseAPortAnotherPodHolds(t *testing.T) {
	h, fake, _ := fakeHostPorts(t)
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	ctx := context.Background()
	if err := h.Add(ctx, "a/eth0", PodHostPorts{Pod: "ns/a", IPs: ip("10.10.0.5"),
		Mappings: []types.PortMapping{pm(types.ProtocolTCP, "172.30.0.11", 80, 80)}}); err != nil {
		t.Fatal(err)
	}
	before := fake.Dump()
	for _, tc := range []struct {
		name     string
		m        types.PortMapping
		conflict bool
	}{
		{"the same address, protocol and port conflicts", pm(types.ProtocolTCP, "172.30.0.11", 80, 90), true},
		{"every address (hostIP unset) conflicts with one of them", pm(types.ProtocolTCP, "", 80, 90), true},
		{"another protocol on the same port does not", pm(types.ProtocolUDP, "172.30.0.11", 80, 90), false},
		{"another address on the same port does not", pm(types.ProtocolTCP, "127.0.0.1", 80, 90), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.Add(ctx, "b/eth0", PodHostPorts{Pod: "ns/b", IPs: ip("10.10.0.6"),
				Mappings: []types.PortMapping{pm(types.ProtocolUDP, "", 7000, 7000), tc.m}})
			var ce *ConflictError
			switch {
			case tc.conflict && !errors.As(err, &ce):
				t.Fatalf("Add = %v, want a conflict", err)
			case tc.conflict:
				if ce.Index != 1 || ce.OtherPod != "ns/a" {
					t.Errorf("conflict names mapping %d of pod %s, want 1 of ns/a (%v)", ce.Index, ce.OtherPod, ce)
				}
				if fake.Dump() != before {
					t.Errorf("a refused Add changed the table")
				}
			case err != nil:
				t.Fatalf("Add = %v", err)
			}
			if err := h.Delete(ctx, "b/eth0"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestHostPortsDeleteAndRestore(t *testing.T) {
	h, fake, _ := fakeHostPorts(t)
	ctx := context.Background()
	a := PodHostPorts{Pod: "ns/a", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.5")},
		Mappings: []types.PortMapping{pm(types.ProtocolTCP, "", 80, 80)}}
	b := PodHostPorts{Pod: "ns/b", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.6")},
		Mappings: []types.PortMapping{pm(types.ProtocolUDP, "", 53, 53)}}
	if err := h.Add(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if err := h.Add(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx, "a"); err != nil {
		t.Fatalf("a second Delete: %v", err)
	}
	if got := dnatRules(t, fake); len(got) != 1 || !strings.Contains(got[0], "10.10.0.6:53") {
		t.Errorf("after deleting a, DNAT rules %q, want b's only", got)
	}

	// A restarted agent: a new feature on the same table gets the record
	// of the interface store; b is gone meanwhile, a is back.
	h2 := NewWith(fake).HostPorts(HostPortConfig{GatewayName: "antrea-gw0", ProcSys: h.cfg.ProcSys})
	if err := h2.Restore(ctx, map[string]PodHostPorts{"a": a, "c": {Pod: "ns/c"}}); err != nil {
		t.Fatal(err)
	}
	if got := dnatRules(t, fake); len(got) != 1 || !strings.Contains(got[0], "10.10.0.5:80") {
		t.Errorf("after Restore, DNAT rules %q, want a's only", got)
	}
	if got := h2.Installed("a"); len(got) != 1 {
		t.Errorf("Installed(a) = %v", got)
	}
}

func TestHostPortsKeepTheRecordWhenTheKernelRefuses(t *testing.T) {
	h, fake, _ := fakeHostPorts(t)
	ctx := context.Background()
	a := PodHostPorts{Pod: "ns/a", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.5")},
		Mappings: []types.PortMapping{pm(types.ProtocolTCP, "", 80, 80)}}
	if err := h.Add(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	// The fake refuses a transaction that deletes a missing object.
	h.table = NewWith(&failing{Fake: fake})
	b := PodHostPorts{Pod: "ns/b", IPs: []netip.Addr{netip.MustParseAddr("10.10.0.6")},
		Mappings: []types.PortMapping{pm(types.ProtocolTCP, "", 81, 81)}}
	if err := h.Add(ctx, "b", b); err == nil {
		t.Fatal("Add succeeded although nft failed")
	}
	if got := h.Installed("b"); got != nil {
		t.Errorf("b recorded although not written: %v", got)
	}
	if got := h.Installed("a"); len(got) != 1 {
		t.Errorf("a lost: %v", got)
	}
}

// failing is a table whose transactions all fail, as nft would on a
// kernel refusing them.
type failing struct{ *knftables.Fake }

func (f *failing) Run(context.Context, *knftables.Transaction) error {
	return errors.New("nft: Operation not permitted")
}
