package traceflowip

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

func pod(what string, ips ...string) End { return End{What: what, Addrs: Addrs(ips...)} }

func given(what, ip string) End { return End{What: what, Addrs: Addrs(ip), Given: true} }

func TestThePacketsFamilyComesFromItsHeaderThenTheGivenAddressThenIPv4First(t *testing.T) {
	v6 := &crdv1beta1.IPv6Header{}
	dual := pod("source Pod ns/a", "10.10.0.5", "fd00:10:244::5")
	for _, tc := range []struct {
		name     string
		packet   crdv1beta1.Packet
		src, dst End
		family   string
		srcIP    string
		dstIP    string
	}{
		{"dual-stack Pods without a header talk IPv4", crdv1beta1.Packet{}, dual,
			pod("destination Pod ns/b", "fd00:10:244::6", "10.10.0.6"), IPv4, "10.10.0.5", "10.10.0.6"},
		{"dual-stack Pods with ipv6Header talk IPv6", crdv1beta1.Packet{IPv6Header: v6}, dual,
			pod("destination Pod ns/b", "10.10.0.6", "fd00:10:244::6"), IPv6, "fd00:10:244::5", "fd00:10:244::6"},
		{"an IPv6 destination IP makes the packet IPv6", crdv1beta1.Packet{}, dual,
			given("spec.destination.ip", "fd00::1"), IPv6, "fd00:10:244::5", "fd00::1"},
		{"IPv6-only Pods talk IPv6 without a header", crdv1beta1.Packet{}, pod("source Pod ns/a", "fd00:10:244::5"),
			pod("destination Service ns/web", "fd00:10:96::10"), IPv6, "fd00:10:244::5", "fd00:10:96::10"},
		{"a live source IP decides when the destination is a Pod", crdv1beta1.Packet{}, given("spec.source.ip", "fd00::9"),
			pod("destination Pod ns/b", "10.10.0.6", "fd00:10:244::6"), IPv6, "fd00::9", "fd00:10:244::6"},
		{"an unknown source leaves the destination to decide", crdv1beta1.Packet{IPv6Header: v6}, End{What: "source Pod ns/a"},
			pod("destination Pod ns/b", "10.10.0.6", "fd00:10:244::6"), IPv6, "invalid IP", "fd00:10:244::6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s, d, err := Pick(&tc.packet, tc.src, tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			if f != tc.family || s.String() != tc.srcIP || d.String() != tc.dstIP {
				t.Fatalf("Pick = %s %s -> %s, want %s %s -> %s", f, s, d, tc.family, tc.srcIP, tc.dstIP)
			}
		})
	}
}

func TestAPacketOfOneFamilyToAnAddressOfTheOtherIsRefusedNamingTheFields(t *testing.T) {
	v6 := &crdv1beta1.IPv6Header{}
	dual := pod("source Pod ns/a", "10.10.0.5", "fd00:10:244::5")
	for _, tc := range []struct {
		name     string
		packet   crdv1beta1.Packet
		src, dst End
		want     []string
	}{
		{"both headers", crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{}, IPv6Header: v6}, dual,
			given("spec.destination.ip", "10.0.0.1"), []string{"spec.packet.ipHeader", "spec.packet.ipv6Header"}},
		{"ipv6Header to an IPv4 destination IP", crdv1beta1.Packet{IPv6Header: v6}, dual,
			given("spec.destination.ip", "10.0.0.1"), []string{"spec.destination.ip 10.0.0.1 is IPv4", "spec.packet.ipv6Header"}},
		{"ipHeader to an IPv6 destination IP", crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{Protocol: 6}}, dual,
			given("spec.destination.ip", "fd00::1"), []string{"spec.destination.ip fd00::1 is IPv6", "spec.packet.ipHeader"}},
		{"ipv6Header from an IPv4 source IP", crdv1beta1.Packet{IPv6Header: v6}, given("spec.source.ip", "10.0.0.9"),
			pod("destination Pod ns/b", "10.10.0.6", "fd00:10:244::6"), []string{"spec.source.ip 10.0.0.9 is IPv4"}},
		{"an IPv6 destination IP from an IPv4 source IP", crdv1beta1.Packet{}, given("spec.source.ip", "10.0.0.9"),
			given("spec.destination.ip", "fd00::1"), []string{"spec.source.ip 10.0.0.9 is IPv4", "spec.destination.ip fd00::1 makes the packet IPv6"}},
		{"ipv6Header from an IPv4-only Pod", crdv1beta1.Packet{IPv6Header: v6}, pod("source Pod ns/a", "10.10.0.5"),
			pod("destination Pod ns/b", "10.10.0.6", "fd00:10:244::6"), []string{"source Pod ns/a has no IPv6 address (it has 10.10.0.5)", "spec.packet.ipv6Header"}},
		{"an IPv6 destination IP from an IPv4-only Pod", crdv1beta1.Packet{}, pod("source Pod ns/a", "10.10.0.5"),
			given("spec.destination.ip", "fd00::1"), []string{"source Pod ns/a has no IPv6 address"}},
		{"Pods of different families", crdv1beta1.Packet{}, pod("source Pod ns/a", "10.10.0.5"),
			pod("destination Service ns/web", "fd00:10:96::10"), []string{"source Pod ns/a (10.10.0.5) and destination Service ns/web (fd00:10:96::10) have no IP family in common"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, err := Pick(&tc.packet, tc.src, tc.dst)
			if err == nil {
				t.Fatalf("Pick chose %s, want an error", f)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q should say %q", err, w)
				}
			}
		})
	}
}

func TestAddrsSkipsWhatIsNoAddressAndUnmapsIPv4(t *testing.T) {
	got := Addrs("None", "", "10.96.0.10", "::ffff:10.96.0.10", "fd00:10:96::a")
	want := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::a")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Addrs = %v, want %v", got, want)
	}
}

func TestAPodsAndAServicesAddressesAreThoseOfBothFamilies(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.10.0.5", PodIPs: []corev1.PodIP{{IP: "10.10.0.5"}, {IP: "fd00:10:244::5"}}}}
	if got := PodAddrs(pod); len(got) != 2 || got[0].String() != "10.10.0.5" || got[1].String() != "fd00:10:244::5" {
		t.Errorf("PodAddrs = %v", got)
	}
	if got := PodAddrs(&corev1.Pod{Status: corev1.PodStatus{PodIP: "fd00::5"}}); len(got) != 1 || !got[0].Is6() {
		t.Errorf("PodAddrs of a Pod with status.podIP alone = %v", got)
	}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "fd00:10:96::a", ClusterIPs: []string{"fd00:10:96::a", "10.96.0.10"}}}
	if got := ServiceAddrs(svc); len(got) != 2 || got[0].String() != "fd00:10:96::a" || got[1].String() != "10.96.0.10" {
		t.Errorf("ServiceAddrs = %v", got)
	}
	if got := ServiceAddrs(&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}}}); len(got) != 0 {
		t.Errorf("ServiceAddrs of a headless Service = %v", got)
	}
}
