package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// agentRun is one run of the agent's policy path on a node: an OpenFlow
// client of its own round (writing through a counter) and a controller.
type agentRun struct {
	flows    *agentof.Client
	counting *bridgetest.Counting
	c        *Controller
	stop     func()
}

func startAgent(t *testing.T, br *bridgetest.Bridge, round uint32, client *fake.Clientset, store interfacestore.InterfaceStore, deny ...bool) *agentRun {
	t.Helper()
	counting := &bridgetest.Counting{Client: br.OF}
	flows, err := agentof.NewClient(counting, round)
	if err != nil {
		t.Fatal(err)
	}
	// deny: the FlowExporter runs (its drops send packet-ins).
	flows.SetDenyTracking(len(deny) > 0 && deny[0])
	ctx, cancel := context.WithCancel(context.Background())
	// As the agent starts: pipeline and pods first, then the policy
	// path, whose writes alone are counted.
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	for _, iface := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if err := flows.InstallPodFlows(iface.InterfaceName, iface.IPs, iface.MAC, uint32(iface.OFPort)); err != nil {
			t.Fatal(err)
		}
	}
	recovered, err := flows.RecoverPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counting.Reset()
	c := NewController("n1", client, flows, store, Options{Recovered: recovered})
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	select {
	case <-c.InitialRealized():
	case <-time.After(20 * time.Second):
		t.Fatal("the policies were not realized")
	}
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return &agentRun{flows: flows, counting: counting, c: c, stop: stop}
}

// policyFlows are the bridge's rule and isolation flows (cookie 0x9011...).
func policyFlows(t *testing.T, br *bridgetest.Bridge) []string {
	t.Helper()
	var out []string
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x9011") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// A resync that finds nothing changed writes nothing to OVS: neither the
// same policies synced again, nor a restarted agent with the same state
// (it adopts the flows its previous run left), with the FlowExporter's deny
// tracking or without. Counted at the OpenFlow connection.
func TestANoOpResyncWritesNoOpenFlowMessage(t *testing.T) {
	for _, deny := range []bool{false, true} {
		t.Run(fmt.Sprintf("deny tracking %v", deny), func(t *testing.T) { testNoOpResync(t, deny) })
	}
}

func testNoOpResync(t *testing.T, deny bool) {
	br := bridgetest.New(t)
	store := interfacestore.NewInterfaceStore()
	var members []cpv1beta2.GroupMember
	for i, name := range []string{"a", "b", "c"} {
		p := br.AddPod(t, name, []string{"10.10.1.2/24", "10.10.1.3/24", "10.10.1.4/24"}[i])
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, "x", "eth0", p.MAC, []net.IP{p.IP}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(iface)
		members = append(members, member("x", name, p.IP.String(),
			cpv1beta2.NamedPort{Name: "http", Port: int32(8080 + i), Protocol: cpv1beta2.ProtocolTCP}))
	}
	port80, http := intstr.FromInt32(80), intstr.FromString("http")
	objs := []*cpv1beta2.AppliedToGroup{{ObjectMeta: metav1.ObjectMeta{Name: "atg-ab"}, GroupMembers: members[:2]},
		{ObjectMeta: metav1.ObjectMeta{Name: "atg-c"}, GroupMembers: members[2:]}}
	ags := []*cpv1beta2.AddressGroup{{ObjectMeta: metav1.ObjectMeta{Name: "ag-c"}, GroupMembers: members[2:]},
		{ObjectMeta: metav1.ObjectMeta{Name: "ag-far"}, GroupMembers: []cpv1beta2.GroupMember{member("y", "far", "10.10.9.9")}}}
	nps := []*cpv1beta2.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "np-in", Generation: 1}, AppliedToGroups: []string{"atg-ab"},
			Rules: []cpv1beta2.NetworkPolicyRule{
				{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-c", "ag-far"}},
					Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &port80}, {Protocol: tcp(), Port: &http}}},
			}},
		{ObjectMeta: metav1.ObjectMeta{Name: "np-out", Generation: 3}, AppliedToGroups: []string{"atg-c"},
			Rules: []cpv1beta2.NetworkPolicyRule{
				{Direction: cpv1beta2.DirectionOut, To: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{
					CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("10.0.0.0").To4()), PrefixLength: 8}}}}},
			}},
	}
	client := newClient()
	for _, o := range objs {
		_ = client.Tracker().Add(o)
	}
	for _, o := range ags {
		_ = client.Tracker().Add(o)
	}
	for _, o := range nps {
		_ = client.Tracker().Add(o)
	}

	first := startAgent(t, br, 1, client, store, deny)
	_, msgs := first.counting.Reset()
	installed := policyFlows(t, br)
	if msgs == 0 || len(installed) == 0 {
		t.Fatalf("the first run should install the policies, wrote %d messages, bridge holds %d policy flows", msgs, len(installed))
	}
	t.Logf("first run: %d flow mods, %d policy flows", msgs, len(installed))

	// The same policies synced again, every one of them.
	for name := range first.c.cache.policyNames() {
		if err := first.c.syncPolicy(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	if bundles, msgs := first.counting.Reset(); bundles != 0 || msgs != 0 {
		t.Fatalf("syncing unchanged policies again should write nothing, wrote %d bundles with %d messages", bundles, msgs)
	}

	// The agent restarts with the same state: a new client (next round)
	// and controller on the same switch.
	first.stop()
	second := startAgent(t, br, 2, client, store, deny)
	time.Sleep(200 * time.Millisecond) // let any late write land
	if bundles, msgs := second.counting.Reset(); bundles != 0 || msgs != 0 {
		t.Fatalf("a restarted agent with the same state should write no policy flow, wrote %d bundles with %d messages", bundles, msgs)
	}
	if got := policyFlows(t, br); strings.Join(got, "\n") != strings.Join(installed, "\n") {
		t.Fatalf("the policy flows should be those of the first run\nbefore:\n%s\nafter:\n%s", strings.Join(installed, "\n"), strings.Join(got, "\n"))
	}
}
