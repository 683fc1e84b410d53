package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// events drains what the fake recorder holds now.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		case <-time.After(200 * time.Millisecond):
			return out
		}
	}
}

// TestUnrealizableServicesGetOneWarningEvent: what the data path cannot
// realize (SCTP ports on the userspace datapath, IPv6 addresses, a port
// another Service holds) gets a Warning Event naming it, once per
// generation of the Service; every other port and Service is installed.
func TestUnrealizableServicesGetOneWarningEvent(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("sig", corev1.ProtocolSCTP, 3868))
	mixed := service("mixed", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("sig", corev1.ProtocolSCTP, 3868, 3868))
	mixed.Generation = 1
	v6only := service("v6", "fd00::10", svcPort("", corev1.ProtocolTCP, 80, 8080))
	dual := withSpec(service("dual", "10.96.0.12", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.12", "fd00::12"}
		s.Spec.ExternalIPs = []string{"192.168.100.12", "2001:db8::12"}
	})
	client, flows := startProxyWith(t, Config{NodeName: "node-1", Recorder: rec, DatapathType: "netdev"}, false,
		mixed, slice("mixed-1", "mixed", ports, ep{ip: "10.10.1.3", node: "node-1"}), v6only, dual)
	eventually(t, flows, "mixed's TCP port and dual's IPv4 addresses should be installed", func(_ []string, st map[string]agentof.ServiceState) bool {
		m, d := st["default/mixed"], st["default/dual"]
		return len(m) == 1 && len(m[vipPort("10.96.0.10", 6, 80)].Endpoints) == 1 &&
			len(d) == 2 && st["default/v6"] == nil
	})
	got := events(rec)
	want := []string{
		"Warning SCTPNotSupported SCTP port(s) sig (3868/SCTP) not realized: the OVS userspace datapath's conntrack keeps no SCTP ports",
		"Warning IPv6NotSupported Service not realized: this node carries IPv4 only, and its ClusterIPs (fd00::10) are not IPv4",
		"Warning IPv6NotSupported ClusterIP fd00::12, external IP 2001:db8::12 not realized",
	}
	if len(got) != len(want) {
		t.Fatalf("want %d events, got:\n%s", len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no event starting %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}

	// A change that does not touch the spec (a new endpoint: mixed is
	// synced again) posts nothing again.
	updateSlice(t, client, "mixed-1", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints = append(s.Endpoints, s.Endpoints[0])
		s.Endpoints[1].Addresses = []string{"10.10.1.4"}
	})
	eventually(t, flows, "mixed should get its second endpoint", func(_ []string, st map[string]agentof.ServiceState) bool {
		return len(st["default/mixed"][vipPort("10.96.0.10", 6, 80)].Endpoints) == 2
	})
	if got := events(rec); len(got) != 0 {
		t.Fatalf("a resync of the same generation should post nothing, got:\n%s", strings.Join(got, "\n"))
	}

	// A new generation that still has the SCTP port posts it again.
	updateService(t, client, "mixed", func(s *corev1.Service) {
		s.Generation = 2
		s.Spec.Ports[0].Port = 81
	})
	eventually(t, flows, "mixed should move to port 81", func(_ []string, st map[string]agentof.ServiceState) bool {
		_, ok := st["default/mixed"][vipPort("10.96.0.10", 6, 81)]
		return ok
	})
	if got := events(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning SCTPNotSupported") || !strings.HasSuffix(got[0], "(Service generation 2)") {
		t.Fatalf("the new generation should post its warning once, got:\n%s", strings.Join(got, "\n"))
	}

	// A Service whose external port another Service holds: PortConflict.
	create(t, client, withSpec(service("second", "10.96.0.13", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.100.12"} }))
	eventually(t, flows, "second should be installed without the port dual holds", func(_ []string, st map[string]agentof.ServiceState) bool {
		return len(st["default/second"]) == 1
	})
	got = events(rec)
	if len(got) != 1 || got[0] != "Warning PortConflict 192.168.100.12:80/TCP (realized for Service default/dual) not realized: another Service has the same address and port; this one gets it once that one lets go (Service generation 0)" {
		t.Fatalf("second should get one PortConflict event naming dual, got:\n%s", strings.Join(got, "\n"))
	}
	if err := client.CoreV1().Services("default").Delete(context.Background(), "dual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, flows, "second should get the external port once dual is gone", func(_ []string, st map[string]agentof.ServiceState) bool {
		return len(st["default/second"]) == 2
	})
}

// TestSCTPWarningOnTheSystemDatapath: the kernel datapath's conntrack has
// SCTP, but AntreaProxy does not realize it yet, and says so.
func TestSCTPWarningOnTheSystemDatapath(t *testing.T) {
	svc := service("sig", "10.96.0.10", svcPort("", corev1.ProtocolSCTP, 3868, 3868))
	ws := unrealized(svc, "system", ipv4Node)
	if len(ws) != 1 || ws[0].reason != ReasonSCTPNotSupported || !strings.Contains(ws[0].message, "AntreaProxy does not realize SCTP ports yet") {
		t.Fatalf("got %v", ws)
	}
	for _, s := range []*corev1.Service{
		service("headless", corev1.ClusterIPNone, svcPort("", corev1.ProtocolSCTP, 3868, 3868)),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
	} {
		if ws := unrealized(s, "netdev", ipv4Node); len(ws) != 0 {
			t.Errorf("%s is not realized by design and should warn nothing, got %v", s.Name, ws)
		}
	}
}
