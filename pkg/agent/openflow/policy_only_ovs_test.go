package openflow

import (
	"context"
	"net"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// trafficEncapMode networkPolicyOnly on a real OVS: pods set up as a
// primary CNI sets them up (a /32 address and everything through a gateway
// the node does not own, AWS's 169.254.1.1 here) resolve that gateway
// through the pipeline's ARP responder and reach each other and the node
// through the pipeline; the node reaches them by its route through the
// gateway port. About 2 s.
func TestPolicyOnlyPodsReachEachOtherThroughAGatewayNobodyOwns(t *testing.T) {
	br := bridgetest.New(t)
	c, err := NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR, PolicyOnly: true}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*bridgetest.Pod{}
	for name, ip := range map[string]string{"a": "10.10.1.3", "b": "10.10.1.4"} {
		p := br.AddPod(t, name, ip+"/24")
		// As ptp or AWS's CNI leave a pod: its address alone, and a
		// default route through a link-local gateway.
		bridgetest.Run(t, "ip", "-n", p.NS, "addr", "flush", "dev", "eth0")
		bridgetest.Run(t, "ip", "-n", p.NS, "addr", "add", ip+"/32", "dev", "eth0")
		bridgetest.Run(t, "ip", "-n", p.NS, "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
		bridgetest.Run(t, "ip", "-n", p.NS, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		p.ServeWho(t, 8080)
		pods[name] = p
	}
	for _, tc := range []struct {
		name     string
		from     *bridgetest.Pod
		to, want string
	}{
		{"pod to pod", pods["a"], "10.10.1.4:8080", "b"},
		{"pod to pod, the other way", pods["b"], "10.10.1.3:8080", "a"},
		{"node to pod", br.NodeHost("node"), "10.10.1.3:8080", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := bridgetest.Answerer(tc.from.AskWhoEventually(t, "tcp4", tc.to)); got != tc.want {
				t.Fatalf("%q answered, want %s\nflows:\n%s", got, tc.want, strings.Join(br.DumpFlows(t), "\n"))
			}
		})
	}
	// The pods took the gateway's MAC for 169.254.1.1.
	neigh := bridgetest.Run(t, "ip", "-n", pods["a"].NS, "neigh", "show", "169.254.1.1")
	if !strings.Contains(neigh, br.GatewayMAC.String()) {
		t.Errorf("pod a's neighbour 169.254.1.1 is %q, want the gateway's MAC %s", neigh, br.GatewayMAC)
	}
}
