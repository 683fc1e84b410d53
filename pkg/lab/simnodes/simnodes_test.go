package simnodes

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNodeCIDRCutsConsecutiveSlash24sAndRefusesWhatDoesNotFit(t *testing.T) {
	for _, tt := range []struct {
		base string
		i    int
		want string
		err  string
	}{
		{"10.128.0.0/9", 0, "10.128.0.0/24", ""},
		{"10.128.0.0/9", 1, "10.128.1.0/24", ""},
		{"10.128.0.0/9", 256, "10.129.0.0/24", ""},
		{"10.128.0.0/9", 32767, "10.255.255.0/24", ""},
		{"10.128.0.0/9", 32768, "", "no room for node 32768"},
		{"10.128.0.0/24", 1, "", "no room for node 1"},
		{"10.128.0.0/25", 0, "", "want an IPv4 prefix of /24 or shorter"},
		{"fd00::/64", 0, "", "want an IPv4 prefix"},
	} {
		got, err := NodeCIDR(netip.MustParsePrefix(tt.base), tt.i)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NodeCIDR(%s, %d) = %v, %v; want an error with %q", tt.base, tt.i, got, err, tt.err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("NodeCIDR(%s, %d) = %v, %v; want %s", tt.base, tt.i, got, err, tt.want)
		}
	}
}

func TestAllocateSkipsNetworkGatewayAndBroadcastAndReusesReleasedIPs(t *testing.T) {
	k := NewKubelet(nil)
	cidr := netip.MustParsePrefix("10.128.5.0/29") // .0 network, .1 gateway, .7 broadcast: .2-.6 usable
	var got []string
	for _, pod := range []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"} {
		ip, err := k.allocate("n", cidr, pod)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip.String())
	}
	if strings.Join(got, " ") != "10.128.5.2 10.128.5.3 10.128.5.4 10.128.5.5 10.128.5.6" {
		t.Errorf("allocated %v", got)
	}
	if again, _ := k.allocate("n", cidr, "ns/c"); again.String() != "10.128.5.4" {
		t.Errorf("a pod asking again got %s, want its own 10.128.5.4", again)
	}
	if _, err := k.allocate("n", cidr, "ns/f"); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Errorf("allocating past the end: %v, want the CIDR full", err)
	}
	k.release("ns/b")
	if ip, err := k.allocate("n", cidr, "ns/f"); err != nil || ip.String() != "10.128.5.3" {
		t.Errorf("after releasing ns/b: %v, %v; want 10.128.5.3 again", ip, err)
	}
}
