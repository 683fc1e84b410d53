package lab

import (
	"reflect"
	"strings"
	"testing"
)

// TestSubnetsSpreadNodesAndAddressEachSubnet: the addresses docs/lab.md
// gives each subnet, and how nodes spread over them.
func TestSubnetsSpreadNodesAndAddressEachSubnet(t *testing.T) {
	for _, tc := range []struct {
		nodes, subnets int
		want           []int // subnet of node 1..nodes
	}{
		{2, 1, []int{1, 1}},
		{4, 2, []int{1, 1, 2, 2}},
		{5, 2, []int{1, 1, 1, 2, 2}},
		{4, 3, []int{1, 1, 2, 3}},
		{3, 3, []int{1, 2, 3}},
	} {
		var got []int
		for i := 1; i <= tc.nodes; i++ {
			got = append(got, nodeSubnet(i, tc.nodes, tc.subnets))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d nodes over %d subnets: %v, want %v", tc.nodes, tc.subnets, got, tc.want)
		}
	}
	for _, tc := range []struct{ got, want string }{
		{subnetPrefix(1).String(), "172.30.0.0/24"},
		{subnetPrefix(2).String(), "172.30.1.0/24"},
		{routerIPIn(1).String(), "172.30.0.4"},
		{routerIPIn(2).String(), "172.30.1.1"},
		{nodeIPIn(3, 2).String(), "172.30.1.13"},
		{nodeIPIn(1, 1).String(), nodeIP(1).String()},
		{subnetBridge(1), "br-underlay"},
		{subnetBridge(2), "br-underlay-2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	// One subnet: only the route to the client host's network.
	if c := routeCommands("ns", 1, 1); len(c) != 1 || strings.Join(c[0], " ") != "ip -n ns route replace 192.168.77.0/24 via 172.30.0.4 dev eth0" {
		t.Errorf("one subnet: routes %v, want only the client's via the router", c)
	}
	c := routeCommands("ns", 2, 2)
	if len(c) != 2 || strings.Join(c[0], " ") != "ip -n ns route replace 192.168.77.0/24 via 172.30.1.1 dev eth0" ||
		strings.Join(c[1], " ") != "ip -n ns route replace 172.30.0.0/16 via 172.30.1.1 dev eth0" {
		t.Errorf("routes of subnet 2: %v", c)
	}
}

// TestSubnetsValidation: the combinations --subnets refuses, each with a
// reason naming the flag.
func TestSubnetsValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"one subnet is the default", func(*Options) {}, ""},
		{"hybrid over two subnets", func(o *Options) { o.Nodes, o.Subnets, o.TrafficMode = 4, 2, "hybrid" }, ""},
		{"encap over two subnets", func(o *Options) { o.Nodes, o.Subnets = 4, 2 }, ""},
		{"hybrid in one subnet", func(o *Options) { o.TrafficMode = "hybrid" }, ""},
		{"an unset count is one subnet", func(o *Options) { o.Subnets = 0 }, ""},
		{"more subnets than nodes", func(o *Options) { o.Nodes, o.Subnets = 2, 3 }, "--subnets 3 is more than --nodes 2"},
		{"too many subnets", func(o *Options) { o.Nodes, o.Subnets = 20, MaxSubnets+1 }, "--subnets must be between 1 and"},
		{"noEncap across a router", func(o *Options) { o.Nodes, o.Subnets, o.TrafficMode = 4, 2, "noEncap" }, "--traffic-mode noEncap needs every node in one subnet"},
		{"the reference CNI across a router", func(o *Options) {
			o.Nodes, o.Subnets, o.Runtime, o.Kubelet = 4, 2, RuntimeReferenceCNI, KubeletSim
		}, "--subnets 2 needs --runtime antrea"},
		{"networkPolicyOnly in one subnet", func(o *Options) { o.TrafficMode = "networkPolicyOnly" }, ""},
		{"networkPolicyOnly across a router", func(o *Options) { o.Nodes, o.Subnets, o.TrafficMode = 4, 2, "networkPolicyOnly" },
			"--traffic-mode networkPolicyOnly needs every node in one subnet"},
		{"networkPolicyOnly with simulated kubelets", func(o *Options) {
			o.TrafficMode, o.Kubelet = "networkPolicyOnly", KubeletSim
		}, "--traffic-mode networkPolicyOnly needs --runtime antrea and --kubelet real"},
		{"networkPolicyOnly with WireGuard", func(o *Options) { o.TrafficMode, o.Encryption = "networkPolicyOnly", "wireguard" },
			"Antrea does not encrypt it"},
		{"a made-up mode", func(o *Options) { o.TrafficMode = "overlay" }, "--traffic-mode must be encap, noEncap, hybrid or networkPolicyOnly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr == "" && o.Subnets < 1:
				t.Fatalf("Subnets left %d", o.Subnets)
			}
		})
	}
}

// TestStatusTellsEachSubnetsNodes: `antrea-lab status`'s underlay line.
func TestStatusTellsEachSubnetsNodes(t *testing.T) {
	st := &State{Options: Options{Nodes: 4, Subnets: 2}, Nodes: []NodeInfo{
		{Name: "node-1", Subnet: 1}, {Name: "node-2", Subnet: 1}, {Name: "node-3", Subnet: 2}, {Name: "node-4", Subnet: 2}}}
	want := "underlay: 2 subnet(s): 172.30.0.0/24 (bridge br-underlay) node-1,node-2; 172.30.1.0/24 (bridge br-underlay-2) node-3,node-4"
	if got := underlayLine(st); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	old := &State{Nodes: []NodeInfo{{Name: "node-1"}}} // a state file from before --subnets
	if got := underlayLine(old); got != "underlay: 1 subnet(s): 172.30.0.0/24 (bridge br-underlay) node-1" {
		t.Errorf("old state: %s", got)
	}
	if st.SubnetOfNode("node-3") != 2 || old.SubnetOfNode("node-1") != 1 || st.SubnetOfNode("node-9") != 0 {
		t.Error("SubnetOfNode wrong")
	}
}
