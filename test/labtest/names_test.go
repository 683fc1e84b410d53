package labtest

import "testing"

func TestNamesAnyMatchesWholeAddressesAndMaskedFields(t *testing.T) {
	for _, c := range []struct {
		line string
		ips  []string
		want bool
	}{
		{"recirc_id(0),in_port(3),eth_type(0x0800),ipv4(src=10.10.1.2,dst=10.10.2.3,proto=6,frag=no), packets:3, actions:drop", []string{"10.10.2.3"}, true},
		{"ipv4(src=10.10.1.2/255.255.255.255,dst=10.10.2.30,proto=6)", []string{"10.10.1.2"}, true},
		{"ipv4(src=10.10.1.20,dst=10.10.2.30,proto=6)", []string{"10.10.1.2", "10.10.2.3"}, false},
		{"tcp,orig=(src=10.10.1.2,dst=10.10.2.3,sport=40000,dport=80),reply=(src=10.10.2.3,dst=10.10.1.2,sport=80,dport=40000),zone=65520", []string{"10.10.2.3"}, true},
		{"orig=(src=10.10.1.25,dst=10.10.2.3)", []string{"10.10.1.2"}, false},
		{"ct_nw_dst=10.10.1.2", []string{"10.10.1.2"}, true},
		{"", []string{"10.10.1.2"}, false},
		// A megaflow's masked field covers the addresses its mask keeps.
		{"ipv4(src=10.10.0.1,dst=10.10.0.2/255.255.255.254,frag=no)", []string{"10.10.0.3"}, true},
		{"ipv4(src=10.10.0.1,dst=10.10.0.2/255.255.255.254,frag=no)", []string{"10.10.0.4"}, false},
		{"ipv4(dst=10.10.1.3/255.255.255.0,proto=6)", []string{"10.10.1.77"}, true},
		{"ipv4(dst=10.10.1.3/255.255.255.0,proto=6)", []string{"10.10.2.3"}, false},
		{"tunnel(src=172.30.0.12,dst=172.30.0.11,geneve()),ipv4(dst=10.10.0.3)", []string{"172.30.0.11"}, true},
	} {
		if got := namesAny(c.line, c.ips); got != c.want {
			t.Errorf("namesAny(%q, %v) = %v, want %v", c.line, c.ips, got, c.want)
		}
	}
}
