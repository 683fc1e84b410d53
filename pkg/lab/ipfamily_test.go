package lab

import (
	"strings"
	"testing"
)

// TestTheIPFamilyIsCheckedAgainstTheOtherOptions: dual and ipv6 are
// accepted where they are built (encap, noEncap on one subnet, hybrid
// across subnets; the Antrea runtime, real kubelets, AntreaProxy; ipv6
// without WireGuard and the addons), and
// every other combination is refused naming why, before anything starts.
func TestTheIPFamilyIsCheckedAgainstTheOtherOptions(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string // "" for accepted
	}{
		{"ipv4 is the default", func(*Options) {}, ""},
		{"an unset family (an older state file) is ipv4", func(o *Options) { o.IPFamily = "" }, ""},
		{"dual over geneve", func(o *Options) { o.IPFamily = IPFamilyDual }, ""},
		{"dual over vxlan", func(o *Options) { o.IPFamily, o.Encap = IPFamilyDual, "vxlan" }, ""},
		{"ipv6 over geneve", func(o *Options) { o.IPFamily = IPFamilyV6 }, ""},
		{"ipv6 over vxlan", func(o *Options) { o.IPFamily, o.Encap = IPFamilyV6, "vxlan" }, ""},
		{"ipv6 with noEncap", func(o *Options) { o.IPFamily, o.TrafficMode = IPFamilyV6, "noEncap" }, ""},
		{"ipv6 with hybrid across subnets", func(o *Options) { o.IPFamily, o.TrafficMode, o.Nodes, o.Subnets = IPFamilyV6, "hybrid", 4, 2 }, ""},
		{"ipv6 across subnets, tunnelled through the router", func(o *Options) { o.IPFamily, o.Nodes, o.Subnets = IPFamilyV6, 4, 2 }, ""},
		{"ipv6 with noEncap across subnets: the router routes no pod CIDR", func(o *Options) { o.IPFamily, o.TrafficMode, o.Nodes, o.Subnets = IPFamilyV6, "noEncap", 4, 2 },
			"--traffic-mode noEncap needs every node in one subnet"},
		{"ipv6 with networkPolicyOnly", func(o *Options) { o.IPFamily, o.TrafficMode = IPFamilyV6, TrafficModeNetworkPolicyOnly }, "--ip-family ipv6 with --traffic-mode networkPolicyOnly"},
		{"ipv6 with the node simulator", func(o *Options) { o.IPFamily, o.Kubelet = IPFamilyV6, KubeletSim }, "--ip-family ipv6 needs --runtime antrea and --kubelet real"},
		{"ipv6 with kube-proxy", func(o *Options) { o.IPFamily, o.Proxy = IPFamilyV6, ProxyKube }, "--ip-family ipv6 needs --proxy antrea"},
		{"ipv6 with WireGuard", func(o *Options) { o.IPFamily, o.Encryption = IPFamilyV6, "wireguard" }, "WireGuard carries IPv4 Pod CIDRs only"},
		{"ipv6 with the Flow Aggregator", func(o *Options) { o.IPFamily, o.FlowVisibility = IPFamilyV6, true }, "--ip-family ipv6 with --flow-visibility"},
		{"GRE over an IPv6 underlay is refused as upstream refuses it", func(o *Options) { o.IPFamily, o.Encap = IPFamilyV6, "gre" }, "refuses a GRE tunnel over an IPv6 underlay"},
		{"dual with noEncap", func(o *Options) { o.IPFamily, o.TrafficMode = IPFamilyDual, "noEncap" }, ""},
		{"dual with hybrid", func(o *Options) { o.IPFamily, o.TrafficMode, o.Nodes, o.Subnets = IPFamilyDual, "hybrid", 4, 2 }, ""},
		{"dual with networkPolicyOnly", func(o *Options) { o.IPFamily, o.TrafficMode = IPFamilyDual, TrafficModeNetworkPolicyOnly }, "--ip-family dual with --traffic-mode networkPolicyOnly"},
		{"dual with the node simulator", func(o *Options) { o.IPFamily, o.Kubelet = IPFamilyDual, KubeletSim }, "--ip-family dual needs --runtime antrea and --kubelet real"},
		{"dual with kube-proxy", func(o *Options) { o.IPFamily, o.Proxy = IPFamilyDual, ProxyKube }, "--ip-family dual needs --proxy antrea"},
		{"a made-up family", func(o *Options) { o.IPFamily = "ipv5" }, `--ip-family must be ipv4, dual or ipv6, got "ipv5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want accepted", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestAnIPv6OnlyLabPutsTheClusterOnIPv6: the control plane's flags, the
// nodes' kubelet and the agents' API server are IPv6 alone in an IPv6-only
// lab (Service and cluster CIDRs, the kube-dns address, the API server's
// advertised address, kubelet's --node-ip and serving address), while an
// IPv4 and a dual-stack lab keep theirs.
func TestAnIPv6OnlyLabPutsTheClusterOnIPv6(t *testing.T) {
	v6 := DefaultOptions()
	v6.IPFamily = IPFamilyV6
	if err := v6.Validate(); err != nil {
		t.Fatal(err)
	}
	dual := DefaultOptions()
	dual.IPFamily = IPFamilyDual
	v4 := DefaultOptions()
	n := NodeInfo{Name: "node-1", IP: "172.30.0.11", IPv6: "fd00:172:30::11"}
	n6 := n
	n6.IPv6Only = true
	checks := []struct {
		what      string
		got, want string
	}{
		{"IPv6 Service CIDR alone", v6.serviceCIDRs(), "fd00:10:96::/112"},
		{"dual-stack Service CIDRs, IPv4 first", dual.serviceCIDRs(), "10.96.0.0/16,fd00:10:96::/112"},
		{"IPv4 Service CIDR", v4.serviceCIDRs(), "10.96.0.0/16"},
		{"IPv6 cluster CIDR alone, a /64 per node", strings.Join(v6.clusterCIDRFlags(), " "), "--cluster-cidr=fd00:10:244::/56 --node-cidr-mask-size=64"},
		{"dual-stack cluster CIDRs", strings.Join(dual.clusterCIDRFlags(), " "),
			"--cluster-cidr=10.10.0.0/16,fd00:10:244::/56 --node-cidr-mask-size-ipv4=24 --node-cidr-mask-size-ipv6=64"},
		{"IPv4 cluster CIDR", strings.Join(v4.clusterCIDRFlags(), " "), "--cluster-cidr=10.10.0.0/16 --node-cidr-mask-size=24"},
		{"kube-dns in the IPv6 Service CIDR", v6.clusterDNS(), "fd00:10:96::a"},
		{"kube-dns of the others", dual.clusterDNS(), ClusterDNS},
		{"the API server on its IPv6 underlay address", v6.apiServerURL(), "https://[fd00:172:30::2]:6443"},
		{"the API server of the others", dual.apiServerURL(), "https://172.30.0.2:6443"},
		{"the agents dial the IPv6 address", v6.labConfOverlay()["antrea-agent.conf"]["kubeAPIServerOverride"], "https://[fd00:172:30::2]:6443"},
		{"no multicast (IGMP) on IPv6", v6.labConfOverlay()["antrea-agent.conf"]["multicast.enable"], "false"},
		{"an IPv6-only node's --node-ip", nodeIPFlag(n6), "fd00:172:30::11"},
		{"a dual-stack node's --node-ip", nodeIPFlag(n), "172.30.0.11,fd00:172:30::11"},
		{"an IPv6-only node's kubelet serves on its IPv6 address", n6.kubeletAddress(), "fd00:172:30::11"},
		{"the outside host's DNS on IPv6", v6.outsideDNSIP().String(), "fd00:172:30::3"},
		{"the kubernetes Service's IPv6 ClusterIP", kubernetesSvcIPv6().String(), "fd00:10:96::1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if !v6.ipv6Underlay() || !dual.ipv6Underlay() || v4.ipv6Underlay() {
		t.Errorf("the underlay holds IPv6 addresses in dual-stack and IPv6-only labs alone")
	}
	m, err := kubeDNSManifest(v6.clusterDNS(), v6.outsideDNSIP().String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m), "clusterIP: fd00:10:96::a") || !strings.Contains(string(m), "forward . fd00:172:30::3") {
		t.Errorf("the IPv6-only lab's kube-dns addon lacks its IPv6 Service address or forwarder:\n%s", m)
	}
}
