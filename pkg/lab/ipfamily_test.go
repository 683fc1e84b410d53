package lab

import (
	"strings"
	"testing"
)

// TestTheIPFamilyIsCheckedAgainstTheOtherOptions: dual is accepted where
// it is built (encap, the Antrea runtime, real kubelets, AntreaProxy), and
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
		{"ipv6 is not built", func(o *Options) { o.IPFamily = IPFamilyV6 }, "--ip-family ipv6 is not built yet"},
		{"GRE over an IPv6 underlay is refused as upstream refuses it", func(o *Options) { o.IPFamily, o.Encap = IPFamilyV6, "gre" }, "refuses a GRE tunnel over an IPv6 underlay"},
		{"dual with noEncap", func(o *Options) { o.IPFamily, o.TrafficMode = IPFamilyDual, "noEncap" }, "--ip-family dual needs --traffic-mode encap"},
		{"dual with hybrid", func(o *Options) { o.IPFamily, o.TrafficMode, o.Nodes, o.Subnets = IPFamilyDual, "hybrid", 4, 2 }, "--ip-family dual needs --traffic-mode encap"},
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
