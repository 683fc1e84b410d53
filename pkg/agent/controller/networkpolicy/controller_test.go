package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// fakeFlows records the rules and isolation the controller asks for.
type fakeFlows struct {
	mu       sync.Mutex
	rules    map[uint32]*agentof.PolicyRule
	isolated [2][]uint32
	// changes counts rule and isolation changes asked for.
	changes int
}

func (f *fakeFlows) ApplyPolicyChange(_ context.Context, ch agentof.PolicyChange) (agentof.PolicyWrite, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, rc := range ch.Rules {
		if rc.Old != nil {
			delete(f.rules, rc.Old.ID)
		}
		if rc.New != nil {
			cp := *rc.New
			f.rules[cp.ID] = &cp
		}
		n++
	}
	for d := range ch.Isolate {
		iso := sets.New(f.isolated[d]...)
		iso.Insert(ch.Isolate[d]...)
		iso.Delete(ch.Release[d]...)
		f.isolated[d] = sets.List(iso)
		n += len(ch.Isolate[d]) + len(ch.Release[d])
	}
	f.changes += n
	return agentof.PolicyWrite{Messages: n}, nil
}

func (f *fakeFlows) FinishPolicyRecovery(context.Context) (int, error) { return 0, nil }

// summary prints the rules as sorted lines "dir peers -> ports svc".
func (f *fakeFlows) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for _, r := range f.rules {
		var svcs []string
		for _, s := range r.Services {
			// {protocol port endPort}, then what only some rules have.
			v := fmt.Sprintf("%d %d %d", s.Protocol, s.Port, s.EndPort)
			if s.SrcPort != 0 {
				v += fmt.Sprintf(" src %d-%d", s.SrcPort, s.SrcEndPort)
			}
			if s.HasICMPType || s.HasICMPCode {
				v += fmt.Sprintf(" icmp %d/%d", s.ICMPType, s.ICMPCode)
			}
			svcs = append(svcs, "{"+v+"}")
		}
		lines = append(lines, fmt.Sprintf("%s %v -> %v [%s]", r.Direction, r.Peers, r.AppliedTo, strings.Join(svcs, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + fmt.Sprintf("\nisolated in=%v out=%v", f.isolated[0], f.isolated[1])
}

func pod(ns, name string) *cpv1beta2.PodReference {
	return &cpv1beta2.PodReference{Namespace: ns, Name: name}
}

func member(ns, name, ip string, ports ...cpv1beta2.NamedPort) cpv1beta2.GroupMember {
	return cpv1beta2.GroupMember{Pod: pod(ns, name), IPs: []cpv1beta2.IPAddress{cpv1beta2.IPAddress(net.ParseIP(ip).To4())}, Ports: ports}
}

func tcp() *cpv1beta2.Protocol { p := cpv1beta2.ProtocolTCP; return &p }

func eventually(t *testing.T, f *fakeFlows, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.summary()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flows did not converge\ngot:\n%s\nwant:\n%s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPolicyBecomesRulesForLocalPodsAndFollowsGroupChanges(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	for i, name := range []string{"a", "b"} {
		iface := interfacestore.NewContainerInterface("veth-"+name, "c-"+name, name, "x", "eth0", nil, nil, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(10 + i)}
		store.AddInterface(iface)
	}
	named := cpv1beta2.NamedPort{Name: "http", Port: 8080, Protocol: cpv1beta2.ProtocolTCP}
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg1"},
		GroupMembers: []cpv1beta2.GroupMember{member("x", "a", "10.10.1.2", named), member("x", "b", "10.10.1.3")}}
	ag := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag1"},
		GroupMembers: []cpv1beta2.GroupMember{member("y", "c", "10.10.2.5")}}
	port80 := intstr.FromInt32(80)
	http := intstr.FromString("http")
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np1", Generation: 1},
		AppliedToGroups: []string{"atg1"},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag1"}},
				Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &port80}}},
			// A named port resolves per pod: only pod a has "http".
			{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{
				CIDR:   cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("192.168.0.0").To4()), PrefixLength: 24},
				Except: []cpv1beta2.IPNet{{IP: cpv1beta2.IPAddress(net.ParseIP("192.168.0.0").To4()), PrefixLength: 25}}}}},
				Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &http}}},
			// Egress isolation only: an empty peer matches nothing.
			{Direction: cpv1beta2.DirectionOut},
		}}
	client := newClient(atg, ag, np)
	flows := &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}
	c := NewController("n1", client, flows, store, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	eventually(t, flows, strings.Join([]string{
		"Ingress [10.10.2.5/32] -> [10 11] [{6 80 0}]",
		"Ingress [192.168.0.128/25] -> [10] [{6 8080 0}]",
		"isolated in=[10 11] out=[10 11]",
	}, "\n"))

	// A new peer joins the address group.
	ag.GroupMembers = append(ag.GroupMembers, member("y", "d", "10.10.2.6"))
	if _, err := client.ControlplaneV1beta2().AddressGroups().(interface {
		Update(context.Context, *cpv1beta2.AddressGroup, metav1.UpdateOptions) (*cpv1beta2.AddressGroup, error)
	}).Update(ctx, ag, metav1.UpdateOptions{}); err != nil {
		t.Skipf("fake clientset cannot update (verbs list/get/watch only): %v", err)
	}
	eventually(t, flows, strings.Join([]string{
		"Ingress [10.10.2.5/32 10.10.2.6/32] -> [10 11] [{6 80 0}]",
		"Ingress [192.168.0.128/25] -> [10] [{6 8080 0}]",
		"isolated in=[10 11] out=[10 11]",
	}, "\n"))
}

func TestIPBlockExceptSplitsIntoDisjointPrefixes(t *testing.T) {
	b := cpv1beta2.IPBlock{
		CIDR:   cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("10.0.0.0").To4()), PrefixLength: 8},
		Except: []cpv1beta2.IPNet{{IP: cpv1beta2.IPAddress(net.ParseIP("10.1.0.0").To4()), PrefixLength: 16}, {IP: cpv1beta2.IPAddress(net.ParseIP("10.2.3.4").To4()), PrefixLength: 32}},
	}
	got := ipBlockPrefixes(b)
	// Every address of 10/8 except the excepts is covered exactly once.
	covered := func(a string) int {
		n := 0
		for _, p := range got {
			if p.Contains(netip.MustParseAddr(a)) {
				n++
			}
		}
		return n
	}
	for a, want := range map[string]int{"10.0.0.1": 1, "10.1.2.3": 0, "10.2.3.4": 0, "10.2.3.5": 1, "10.255.255.255": 1, "11.0.0.0": 0} {
		if n := covered(a); n != want {
			t.Errorf("%s is covered %d times by %v, want %d", a, n, got, want)
		}
	}
}

// An egress rule with a named port and an ipBlock peer arrives with the
// AddressGroup of the Pods inside the block (issue 10): the name resolves
// per Pod, as for a selector peer, and the block's other addresses keep
// only the numbered ports.
func TestEgressNamedPortToAnIPBlockResolvesOnThePodsOfTheBlock(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	for i, name := range []string{"a", "b"} {
		iface := interfacestore.NewContainerInterface("veth-"+name, "c-"+name, name, "x", "eth0", nil, nil, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(10 + i)}
		store.AddInterface(iface)
	}
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg1"},
		GroupMembers: []cpv1beta2.GroupMember{member("x", "a", "10.10.1.2"), member("x", "b", "10.10.1.3")}}
	block := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "block"},
		GroupMembers: []cpv1beta2.GroupMember{
			member("y", "c", "10.10.2.5", cpv1beta2.NamedPort{Name: "http", Port: 8080, Protocol: cpv1beta2.ProtocolTCP}),
			member("y", "d", "10.10.2.6", cpv1beta2.NamedPort{Name: "http", Port: 9090, Protocol: cpv1beta2.ProtocolTCP}),
		}}
	http, https := intstr.FromString("http"), intstr.FromInt32(443)
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np1", Generation: 1},
		AppliedToGroups: []string{"atg1"},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionOut,
			To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"block"}, IPBlocks: []cpv1beta2.IPBlock{{
				CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("10.0.0.0").To4()), PrefixLength: 8}}}},
			Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &http}, {Protocol: tcp(), Port: &https}}}}}
	client := newClient(atg, block, np)
	flows := &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}
	c := NewController("n1", client, flows, store, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	eventually(t, flows, strings.Join([]string{
		"Egress [10.0.0.0/8] -> [10 11] [{6 443 0}]",
		"Egress [10.10.2.5/32] -> [10 11] [{6 8080 0} {6 443 0}]",
		"Egress [10.10.2.6/32] -> [10 11] [{6 9090 0} {6 443 0}]",
		"isolated in=[] out=[10 11]",
	}, "\n"))
}

// A pod of an AppliedToGroup whose interface the CNI server records later
// is added to its policies' rules when the server's event arrives.
func TestAPodEventRealizesThePoliciesOfThePod(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	addIface := func(name string, port int32) {
		iface := interfacestore.NewContainerInterface("veth-"+name, "c-"+name, name, "x", "eth0", nil, nil, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: port}
		store.AddInterface(iface)
	}
	addIface("a", 10)
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg1"},
		GroupMembers: []cpv1beta2.GroupMember{member("x", "a", "10.10.1.2"), member("x", "b", "10.10.1.3")}}
	ag := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag1"},
		GroupMembers: []cpv1beta2.GroupMember{member("y", "c", "10.10.2.5")}}
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np1", Generation: 1}, AppliedToGroups: []string{"atg1"},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag1"}}}}}
	flows := &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}
	events := make(chan interfacestore.PodEvent)
	c := NewController("n1", newClient(atg, ag, np), flows, store, Options{PodEvents: events})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	eventually(t, flows, "Ingress [10.10.2.5/32] -> [10] []\nisolated in=[10] out=[]")
	addIface("b", 11)
	events <- interfacestore.PodEvent{PodNamespace: "x", PodName: "b", ContainerID: "c-b"}
	eventually(t, flows, "Ingress [10.10.2.5/32] -> [10 11] []\nisolated in=[10 11] out=[]")
	store.DeleteInterface(store.GetContainerInterfacesByPod("a", "x")[0])
	events <- interfacestore.PodEvent{PodNamespace: "x", PodName: "a", ContainerID: "c-a", Deleted: true}
	eventually(t, flows, "Ingress [10.10.2.5/32] -> [11] []\nisolated in=[11] out=[]")
}

// An Antrea-native policy does not isolate the pods it applies to: only
// its rules say what is allowed or dropped, and Pass has no flow in the K8s
// rule tables (it hands the decision to them).
func TestAnAntreaNativePolicyDoesNotIsolateItsPods(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	iface := interfacestore.NewContainerInterface("veth-a", "c-a", "a", "x", "eth0", nil, nil, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: 10}
	store.AddInterface(iface)
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg1"}, GroupMembers: []cpv1beta2.GroupMember{member("x", "a", "10.10.1.2")}}
	ag := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag1"}, GroupMembers: []cpv1beta2.GroupMember{member("y", "c", "10.10.2.5")}}
	drop, pass := cpv1beta2.RuleActionDrop, cpv1beta2.RuleActionPass
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "acnp1", Generation: 1}, AppliedToGroups: []string{"atg1"},
		SourceRef: &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "deny-c"},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionIn, Action: &drop, From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag1"}}},
			// Pass leaves the decision to K8s NetworkPolicy (a flow going on to its table).
			{Direction: cpv1beta2.DirectionIn, Action: &pass, Priority: 1, From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{
				CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("10.0.0.0").To4()), PrefixLength: 8}}}}},
		}}
	flows := &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}
	c := NewController("n1", newClient(atg, ag, np), flows, store, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	eventually(t, flows, "Ingress [10.0.0.0/8] -> [10] []\nIngress [10.10.2.5/32] -> [10] []\nisolated in=[] out=[]")
	flows.mu.Lock()
	defer flows.mu.Unlock()
	var dropRule, passRule *agentof.PolicyRule
	for _, r := range flows.rules {
		if r.Tier != agentof.TierAntrea {
			t.Errorf("a ClusterNetworkPolicy without tier priority goes in the Antrea-native table, rule %+v went in %d", r, r.Tier)
		}
		switch r.Action {
		case agentof.ActionDrop:
			dropRule = r
		case agentof.ActionPass:
			passRule = r
		}
	}
	if dropRule == nil || passRule == nil || dropRule.Priority <= passRule.Priority {
		t.Fatalf("the first rule (Drop) is evaluated before the second (Pass): its priority must be higher, got %+v and %+v", dropRule, passRule)
	}
}
