package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// recordingNodePolicy stands in for nodenet.NodePolicy (tested on a real
// kernel in its package): it keeps the last list written.
type recordingNodePolicy struct {
	mu     sync.Mutex
	writes int
	rules  []nodenet.NodePolicyRule
}

func (r *recordingNodePolicy) SetNodePolicy(_ context.Context, rules []nodenet.NodePolicyRule) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	r.rules = rules
	return nil
}

// summary prints the rules in order, one a line:
// "<name> <in|out> <action> [baseline] <peers> <services> [log]".
func (r *recordingNodePolicy) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []string
	for _, x := range r.rules {
		dir := "in"
		if x.Egress {
			dir = "out"
		}
		line := fmt.Sprintf("%s %s %s", x.Name, dir, x.Action)
		if x.Baseline {
			line += " baseline"
		}
		line += fmt.Sprintf(" %v", x.Peers)
		for _, s := range x.Services {
			line += fmt.Sprintf(" %d/%d", s.Protocol, s.Port)
		}
		if x.Log {
			line += " log"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func ipBlock(cidr string) cpv1beta2.IPBlock {
	_, n, _ := net.ParseCIDR(cidr)
	ones, _ := n.Mask.Size()
	ip := n.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return cpv1beta2.IPBlock{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(ip), PrefixLength: int32(ones)}}
}

func nodeMemberOf(name string, ips ...string) cpv1beta2.GroupMember {
	m := cpv1beta2.GroupMember{Node: &cpv1beta2.NodeReference{Name: name}}
	for _, ip := range ips {
		m.IPs = append(m.IPs, cpv1beta2.IPAddress(net.ParseIP(ip).To4()))
	}
	return m
}

// Policies applied to this Node by a nodeSelector become its netfilter's
// rules, in evaluation order across policies (tier, policy priority, rule
// index), the baseline tier's marked; a policy applied to another Node
// adds nothing, and no OVS flow is written for any of them.
func TestPoliciesAppliedToThisNodeBecomeItsNetfilterRulesInEvaluationOrder(t *testing.T) {
	atgHere := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-n1"}, GroupMembers: []cpv1beta2.GroupMember{nodeMemberOf("n1", "172.30.0.2")}}
	atgThere := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-n2"}, GroupMembers: []cpv1beta2.GroupMember{nodeMemberOf("n2", "172.30.0.3")}}
	ag := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag1"},
		GroupMembers: []cpv1beta2.GroupMember{member("y", "c", "10.10.2.5"), nodeMemberOf("n2", "172.30.0.3")}}
	allow, drop, reject := cpv1beta2.RuleActionAllow, cpv1beta2.RuleActionDrop, cpv1beta2.RuleActionReject
	app, baseline := int32(250), int32(253)
	five, ten := 5.0, 10.0
	p22, p80 := intstr.FromInt32(22), intstr.FromInt32(80)
	acnp := func(name string, tier int32, prio *float64, atg string, rules ...cpv1beta2.NetworkPolicyRule) *cpv1beta2.NetworkPolicy {
		return &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, AppliedToGroups: []string{atg},
			SourceRef:    &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: name},
			TierPriority: &tier, Priority: prio, Rules: rules}
	}
	low := acnp("low", app, &ten, "atg-n1", cpv1beta2.NetworkPolicyRule{Name: "drop-ssh", Direction: cpv1beta2.DirectionIn, Action: &drop,
		From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{ipBlock("0.0.0.0/0")}}, Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &p22}}})
	high := acnp("high", app, &five, "atg-n1",
		cpv1beta2.NetworkPolicyRule{Name: "allow-ssh", Direction: cpv1beta2.DirectionIn, Action: &allow,
			From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag1"}}, Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &p22}}},
		cpv1beta2.NetworkPolicyRule{Name: "reject-http", Direction: cpv1beta2.DirectionOut, Action: &reject, EnableLogging: true,
			To: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{ipBlock("192.168.77.0/24")}}, Services: []cpv1beta2.Service{{Protocol: tcp(), Port: &p80}}})
	base := acnp("base", baseline, &five, "atg-n1", cpv1beta2.NetworkPolicyRule{Name: "deny-all", Direction: cpv1beta2.DirectionIn, Action: &drop,
		From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{ipBlock("0.0.0.0/0")}}})
	other := acnp("other", app, &five, "atg-n2", cpv1beta2.NetworkPolicyRule{Name: "drop-all", Direction: cpv1beta2.DirectionIn, Action: &drop,
		From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{ipBlock("0.0.0.0/0")}}})

	flows := &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}
	node := &recordingNodePolicy{}
	c := NewController("n1", newClient(atgHere, atgThere, ag, low, high, base, other), flows,
		interfacestore.NewInterfaceStore(), Options{NodePolicy: node})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	want := strings.Join([]string{
		"AntreaClusterNetworkPolicy:high allow-ssh in Allow [10.10.2.5/32 172.30.0.3/32] 6/22",
		"AntreaClusterNetworkPolicy:high reject-http out Reject [192.168.77.0/24] 6/80 log",
		"AntreaClusterNetworkPolicy:low drop-ssh in Drop [0.0.0.0/0] 6/22",
		"AntreaClusterNetworkPolicy:base deny-all in Drop baseline [0.0.0.0/0]",
	}, "\n")
	deadline := time.Now().Add(10 * time.Second)
	for node.summary() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the Node's rules did not converge\ngot:\n%s\nwant:\n%s", node.summary(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-c.InitialRealized():
	case <-time.After(10 * time.Second):
		t.Fatal("the initial policies were not reported realized")
	}
	node.mu.Lock()
	writes := node.writes
	node.mu.Unlock()
	if writes != 1 {
		t.Errorf("the policies known at start were written in %d steps, want the whole list at once", writes)
	}
	if got := flows.summary(); got != "\nisolated in=[] out=[]" {
		t.Errorf("policies applied to Nodes wrote OVS flows:\n%s", got)
	}
}

// With no policy at all, the agent still writes the Node's (empty) rule
// list once: what an earlier run left goes.
func TestNoPolicyClearsTheNodeRulesOfAnEarlierRun(t *testing.T) {
	node := &recordingNodePolicy{rules: []nodenet.NodePolicyRule{{Name: "left by an earlier run"}}}
	c := NewController("n1", newClient(), &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}},
		interfacestore.NewInterfaceStore(), Options{NodePolicy: node})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		node.mu.Lock()
		writes, n := node.writes, len(node.rules)
		node.mu.Unlock()
		if writes == 1 && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d writes leaving %d rules, want one write of none", writes, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
