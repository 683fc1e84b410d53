package egress

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
)

func indexer(objs ...any) cache.Indexer {
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		_ = i.Add(o)
	}
	return i
}

func node(name, ip string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

func eg(name, ip, pool string, created int) *crdv1beta1.Egress {
	return &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec: crdv1beta1.EgressSpec{EgressIP: ip, ExternalIPPool: pool}}
}

func member(ns, name, ip string) cpv1beta2.GroupMember {
	return cpv1beta2.GroupMember{Pod: &cpv1beta2.PodReference{Namespace: ns, Name: name}, IPs: []cpv1beta2.IPAddress{cpv1beta2.IPAddress(net.ParseIP(ip))}}
}

// TestComputePlacesEachIPOnAnAllowedAliveNode checks the decisions of one
// node (node-1) for Egresses with and without a pool, a pod that two
// Egresses select, and members on this node and others.
func TestComputePlacesEachIPOnAnAllowedAliveNode(t *testing.T) {
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "only-node-2"},
		Spec: crdv1beta1.ExternalIPPoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress": "yes"}}}}
	c := &Controller{cfg: Config{NodeName: "node-1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
		Egresses: crdlisters.NewEgressLister(indexer(
			eg("pinned", "172.30.0.201", "only-node-2", 1),
			eg("newer", "172.30.0.202", "any", 2),
			eg("pending", "", "only-node-2", 3))),
		Pools: crdlisters.NewExternalIPPoolLister(indexer(pool, &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "any"}})),
		Nodes: corelisters.NewNodeLister(indexer(node("node-1", "172.30.0.11", nil),
			node("node-2", "172.30.0.12", map[string]string{"egress": "yes"}), node("node-3", "172.30.0.13", nil)))},
		groups: map[string][]cpv1beta2.GroupMember{
			// a1 is selected by both: the older Egress ("pinned") wins it.
			"pinned":  {member("x", "a1", "10.10.1.2"), member("x", "b1", "10.10.2.2")},
			"newer":   {member("x", "a1", "10.10.1.2"), member("x", "a2", "10.10.1.3"), member("x", "c1", "10.10.3.2")},
			"pending": {member("x", "a3", "10.10.1.4")},
		}}
	alive := []string{"node-1", "node-2", "node-3"}
	st, err := c.compute(alive)
	if err != nil {
		t.Fatal(err)
	}
	if st.Owners["pinned"] != "node-2" {
		t.Errorf("the pool allows only node-2, yet %q holds pinned's IP", st.Owners["pinned"])
	}
	if _, ok := st.Owners["pending"]; ok {
		t.Error("an Egress without an IP yet has an owner")
	}
	newer := st.Owners["newer"]
	if newer != Owner("172.30.0.202", alive) {
		t.Errorf("newer is held by %q, want the rendezvous owner %q", newer, Owner("172.30.0.202", alive))
	}
	a1, a2, b1, c1 := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.1.3"), netip.MustParseAddr("10.10.2.2"), netip.MustParseAddr("10.10.3.2")
	if got := st.Remote[a1]; !got.Equal(net.ParseIP("172.30.0.12")) {
		t.Errorf("local pod a1 (pinned's, the older Egress) goes to %v, want node-2 172.30.0.12", got)
	}
	if _, ok := st.Remote[b1]; ok {
		t.Error("a pod of another node got a flow here")
	}
	if newer == "node-1" {
		if st.SNAT[a2] != netip.MustParseAddr("172.30.0.202") || st.SNAT[c1] != netip.MustParseAddr("172.30.0.202") {
			t.Errorf("node-1 holds newer's IP but does not SNAT its members: %v", st.SNAT)
		}
		if len(st.Hold) != 1 || st.Hold[0] != netip.MustParseAddr("172.30.0.202") {
			t.Errorf("node-1 holds %v", st.Hold)
		}
	} else {
		if len(st.SNAT) != 0 || len(st.Hold) != 0 {
			t.Errorf("node-1 holds nothing but SNATs %v and holds %v", st.SNAT, st.Hold)
		}
		if _, ok := st.Remote[a2]; !ok {
			t.Error("local pod a2 is not sent to newer's owner")
		}
	}
	if _, ok := st.SNAT[a1]; ok && newer == "node-1" {
		t.Error("a1 belongs to the older Egress, yet node-1 SNATs it to newer's IP")
	}

	// node-2 fails: pinned's pool has no other node, so nobody holds it,
	// and a1 takes the next Egress that selects it and has a holder.
	alive = []string{"node-1", "node-3"}
	st, err = c.compute(alive)
	if err != nil {
		t.Fatal(err)
	}
	if st.Owners["pinned"] != "" {
		t.Errorf("pinned is held by %q with its only allowed node gone", st.Owners["pinned"])
	}
	switch newer := st.Owners["newer"]; newer {
	case "node-1":
		if st.SNAT[a1] != netip.MustParseAddr("172.30.0.202") {
			t.Errorf("a1 is not SNATed to newer's IP on its holder node-1: %v", st.SNAT)
		}
	case "node-3":
		if got := st.Remote[a1]; !got.Equal(net.ParseIP("172.30.0.13")) {
			t.Errorf("a1 goes to %v, want newer's holder node-3", got)
		}
	default:
		t.Errorf("newer is held by %q", newer)
	}
}

// TestComputeRealizesEgressIPsOnePerFamily: upstream's plural fields
// (externalIPPools and egressIPs, an IP of each family) are realized as the
// singular ones: the first IP's rendezvous owner holds them all, and each
// member pod leaves with the IP of its own family.
func TestComputeRealizesEgressIPsOnePerFamily(t *testing.T) {
	dual := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: crdv1beta1.EgressSpec{
		ExternalIPPools: []string{"v4", "v6"}, EgressIPs: []string{"172.30.0.203", "fd00:30::203"}}}
	v4only := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "v4only", CreationTimestamp: metav1.NewTime(time.Unix(5, 0))},
		Spec: crdv1beta1.EgressSpec{ExternalIPPools: []string{"v4"}, EgressIPs: []string{"172.30.0.204"}}}
	pools := crdlisters.NewExternalIPPoolLister(indexer(&crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "v4"}},
		&crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "v6"}}))
	nodes := corelisters.NewNodeLister(indexer(node("node-1", "172.30.0.11", nil), node("node-2", "172.30.0.12", nil)))
	alive := []string{"node-1", "node-2"}
	groups := map[string][]cpv1beta2.GroupMember{
		"dual":   {member("x", "a1", "10.10.1.2"), member("x", "a1v6", "fd00:10:1::2")},
		"v4only": {member("x", "a2", "10.10.1.3"), member("x", "a2v6", "fd00:10:1::3")},
	}
	for _, name := range alive {
		c := &Controller{cfg: Config{NodeName: name,
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:1::/64")},
			Egresses: crdlisters.NewEgressLister(indexer(dual, v4only)), Pools: pools, Nodes: nodes}, groups: groups}
		st, err := c.compute(alive)
		if err != nil {
			t.Fatal(err)
		}
		owner := Owner("172.30.0.203", alive)
		if st.Owners["dual"] != owner || st.IPs["dual"] != netip.MustParseAddr("172.30.0.203") {
			t.Fatalf("%s: dual is held by %q with %v, want the first IP's owner %q", name, st.Owners["dual"], st.IPs["dual"], owner)
		}
		a1, a1v6 := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("fd00:10:1::2")
		a2, a2v6 := netip.MustParseAddr("10.10.1.3"), netip.MustParseAddr("fd00:10:1::3")
		if name == owner {
			if st.SNAT[a1] != netip.MustParseAddr("172.30.0.203") || st.SNAT[a1v6] != netip.MustParseAddr("fd00:30::203") {
				t.Errorf("%s holds dual, yet SNATs %v", name, st.SNAT)
			}
			if !slices.Contains(st.Hold, netip.MustParseAddr("fd00:30::203")) || !slices.Contains(st.Hold, netip.MustParseAddr("172.30.0.203")) {
				t.Errorf("%s holds dual, yet holds only %v", name, st.Hold)
			}
		} else if _, ok := st.Remote[a1v6]; !ok {
			t.Errorf("%s: the IPv6 member of dual is not sent to its holder: %v", name, st.Remote)
		}
		// v4only has no IPv6 IP: its IPv6 member leaves as any pod does.
		if _, ok := st.SNAT[a2v6]; ok {
			t.Errorf("%s: v4only's IPv6 member is SNATed: %v", name, st.SNAT)
		}
		if _, ok := st.Remote[a2v6]; ok {
			t.Errorf("%s: v4only's IPv6 member is sent to a holder: %v", name, st.Remote)
		}
		if _, snat := st.SNAT[a2]; !snat && st.Remote[a2] == nil {
			t.Errorf("%s: v4only's IPv4 member is neither SNATed nor sent to the holder", name)
		}
	}
}

// TestComputeLeavesAnEgressIPWithoutAPoolWhereTheOperatorPutIt: an egressIP
// without a pool is held by the node that has it as an address of its own
// (the others follow the status), and no agent adds it anywhere.
func TestComputeLeavesAnEgressIPWithoutAPoolWhereTheOperatorPutIt(t *testing.T) {
	static := eg("static", "172.30.0.250", "", 1)
	static.Status.EgressNode = "node-3"
	groups := map[string][]cpv1beta2.GroupMember{"static": {member("x", "a1", "10.10.1.2"), member("x", "b1", "10.10.2.2")}}
	nodes := corelisters.NewNodeLister(indexer(node("node-1", "172.30.0.11", nil), node("node-3", "172.30.0.13", nil)))
	alive := []string{"node-1", "node-3"}
	for _, tc := range []struct {
		name  string
		local bool
	}{{"another node has it", false}, {"this node has it", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{cfg: Config{NodeName: "node-1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
				Egresses: crdlisters.NewEgressLister(indexer(static)), Pools: crdlisters.NewExternalIPPoolLister(indexer()), Nodes: nodes,
				IsLocal: func(ip netip.Addr) bool { return tc.local && ip == netip.MustParseAddr("172.30.0.250") }},
				groups: groups}
			st, err := c.compute(alive)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Hold) != 0 {
				t.Errorf("an agent adds an egressIP without a pool: %v", st.Hold)
			}
			a1 := netip.MustParseAddr("10.10.1.2")
			if tc.local {
				if st.Owners["static"] != "node-1" || st.SNAT[a1] != netip.MustParseAddr("172.30.0.250") || len(st.Remote) != 0 {
					t.Errorf("the node with the address does not SNAT: %+v", st)
				}
			} else if st.Owners["static"] != "node-3" || !st.Remote[a1].Equal(net.ParseIP("172.30.0.13")) {
				t.Errorf("the status names node-3, yet a1 goes to %v (owners %v)", st.Remote[a1], st.Owners)
			}
		})
	}
}

// TestComputeShapesTheEgressesThisNodeHoldsWithABandwidth: the holder of a
// bandwidth's Egress meters its local and remote members at the rate, in
// kilobits; without the gate, or on a node that does not hold the IP, no
// meter.
func TestComputeShapesTheEgressesThisNodeHoldsWithABandwidth(t *testing.T) {
	limited := eg("limited", "172.30.0.250", "", 1)
	limited.Spec.Bandwidth = &crdv1beta1.Bandwidth{Rate: "10M", Burst: "2M"}
	groups := map[string][]cpv1beta2.GroupMember{"limited": {member("x", "a1", "10.10.1.2"), member("x", "b1", "10.10.2.2")}}
	for _, tc := range []struct {
		name           string
		holds, shaping bool
		want           bool
	}{{"held, gate on", true, true, true}, {"held, gate off", true, false, false}, {"held elsewhere", false, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{cfg: Config{NodeName: "node-1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
				Egresses: crdlisters.NewEgressLister(indexer(limited)), Pools: crdlisters.NewExternalIPPoolLister(indexer()),
				Nodes:   corelisters.NewNodeLister(indexer(node("node-1", "172.30.0.11", nil))),
				IsLocal: func(netip.Addr) bool { return tc.holds }, TrafficShaping: tc.shaping},
				groups: groups}
			st, err := c.compute([]string{"node-1"})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := st.Shaped["limited"]
			if ok != tc.want {
				t.Fatalf("shaped %v, want %v: %+v", ok, tc.want, st.Shaped)
			}
			if !ok {
				return
			}
			want := agentof.EgressShaping{RateKbps: 10000, BurstKb: 2000,
				Local: []netip.Addr{netip.MustParseAddr("10.10.1.2")}, Remote: []netip.Addr{netip.MustParseAddr("10.10.2.2")}}
			if !(agentof.EgressFlows{Shaped: map[string]agentof.EgressShaping{"e": got}}).Equal(agentof.EgressFlows{Shaped: map[string]agentof.EgressShaping{"e": want}}) {
				t.Errorf("shaping %+v, want %+v", got, want)
			}
		})
	}
	if _, _, err := (&crdv1beta1.Bandwidth{Rate: "500", Burst: "1M"}).Kbits(); err == nil || !strings.Contains(err.Error(), "bandwidth.rate") {
		t.Errorf("a rate below 1k: err = %v, want one naming bandwidth.rate", err)
	}
}

type countingDatapath struct{ flows, snat int }

func (d *countingDatapath) SetEgressFlows(context.Context, agentof.EgressFlows) error {
	d.flows++
	return nil
}
func (d *countingDatapath) SetEgressSNAT(context.Context, nodenet.EgressSNAT) error {
	d.snat++
	return nil
}

// TestSyncWritesFlowsAndSNATOnlyWhenTheyChange: events that change nothing
// of this node's state (a Node's heartbeat) write no bundle and no nft
// transaction; a change of the members writes again.
func TestSyncWritesFlowsAndSNATOnlyWhenTheyChange(t *testing.T) {
	joined := make(chan struct{})
	close(joined)
	cl := &Cluster{name: "node-1", alive: map[string]bool{"node-1": true, "node-2": true}, joined: joined}
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "only-node-2"},
		Spec: crdv1beta1.ExternalIPPoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress": "yes"}}}}
	dp := &countingDatapath{}
	c := NewController(Config{NodeName: "node-1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
		Egresses: crdlisters.NewEgressLister(indexer(eg("pinned", "172.30.0.201", "only-node-2", 1))),
		Pools:    crdlisters.NewExternalIPPoolLister(indexer(pool)),
		Nodes: corelisters.NewNodeLister(indexer(node("node-1", "172.30.0.11", nil),
			node("node-2", "172.30.0.12", map[string]string{"egress": "yes"}))),
		Flows: dp, SNAT: dp, Cluster: cl,
		IPs: &IPAssigner{link: "lo", announce: func(string, net.IP) error { return nil }}})
	c.groups = map[string][]cpv1beta2.GroupMember{"pinned": {member("x", "a1", "10.10.1.2")}}
	c.listed = true
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := c.sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if dp.flows != 1 || dp.snat != 1 {
		t.Errorf("three syncs of one state wrote the flows %d times and the SNAT %d times, want once each", dp.flows, dp.snat)
	}
	c.mu.Lock()
	c.groups["pinned"] = append(c.groups["pinned"], member("x", "a2", "10.10.1.3"))
	c.mu.Unlock()
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if dp.flows != 2 {
		t.Errorf("a new local member did not rewrite the flows (%d writes)", dp.flows)
	}
}
