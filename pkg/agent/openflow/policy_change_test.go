package openflow

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func apply(t *testing.T, c *Client, ch PolicyChange) PolicyWrite {
	t.Helper()
	w, err := c.ApplyPolicyChange(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestAPolicyChangeWritesOnlyTheFlowsThatDiffer(t *testing.T) {
	c, br := newUnitClient(t)
	r := &PolicyRule{ID: 1, Key: "np1 0/", Direction: DirectionIngress, Peers: hostPrefixes(3, "10.20.0.1"),
		AppliedTo: []uint32{10, 11}, Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}}, Priority: PolicyRulePriority}
	// 3 peers + 2 ports + 1 service + conj_id + 2 metric flows (an Allow
	// rule's: new connections, later packets) + 2 isolated ports.
	if w := apply(t, c, PolicyChange{Rules: []RuleChange{{New: r}}, Isolate: [2][]uint32{{10, 11}}}); w.Messages != 3+2+1+1+2+2 || !w.Narrowed {
		t.Fatalf("a new rule with 3 peers, 2 ports, 1 service and 2 isolated ports should write 11 flows and narrow, wrote %+v", w)
	}
	bundles := br.bundles
	same := *r
	if w := apply(t, c, PolicyChange{Rules: []RuleChange{{Old: r, New: &same}}}); w.Messages != 0 || br.bundles != bundles {
		t.Fatalf("the same rule again should write nothing, wrote %+v in %d bundles", w, br.bundles-bundles)
	}
	wider := same
	wider.Peers = hostPrefixes(4, "10.20.0.1")
	if w := apply(t, c, PolicyChange{Rules: []RuleChange{{Old: &same, New: &wider}}}); w.Messages != 1 || w.Narrowed {
		t.Fatalf("one more peer should add one flow without narrowing, wrote %+v", w)
	}
	if w := apply(t, c, PolicyChange{Rules: []RuleChange{{Old: &wider, New: &same}}}); w.Messages != 1 || !w.Narrowed {
		t.Fatalf("one peer less should delete one flow and narrow, wrote %+v", w)
	}
	if w := apply(t, c, PolicyChange{Release: [2][]uint32{{11}}}); w.Messages != 1 || w.Narrowed {
		t.Fatalf("releasing a port should delete its drop flow without narrowing, wrote %+v", w)
	}
	if w := apply(t, c, PolicyChange{Rules: []RuleChange{{Old: &same}}, Release: [2][]uint32{{10}}}); w.Messages != 3+2+1+1+2+1 || !w.Narrowed {
		t.Fatalf("removing the rule should delete its 9 flows and the last drop flow, wrote %+v", w)
	}
	var left []string
	for _, tb := range []*TableSpec{AntreaPolicyIngressRuleTable, IngressRuleTable, IngressDefaultRuleTable, IngressBaselineRuleTable, IngressMetricTable} {
		left = append(left, br.inTable(c.p.Table(tb))...)
	}
	if len(left) != 7 {
		t.Fatalf("only the fixed flows (2 bypasses in AntreaPolicyIngressRule, 5 misses) should remain in the ingress tables, found %d:\n%s",
			len(left), strings.Join(left, "\n"))
	}
}

// policyFlowsOf is the bridge's flows of the policy tables' rules and
// isolation (cookie 0x9011...), as dump-flows prints them.
func policyFlowsOf(t *testing.T, br *bridgetest.Bridge) string {
	t.Helper()
	var out []string
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x9011") {
			out = append(out, f)
		}
	}
	return strings.Join(out, "\n")
}

func clientPolicyFlows(c *Client) string {
	var out []string
	for _, f := range clientFlows(c) {
		if strings.Contains(f, "cookie=0x9011") {
			out = append(out, f)
		}
	}
	return strings.Join(out, "\n")
}

// A restarted agent's client finds the policy flows of the previous run in
// place: the same rules with the ids noted on them and the same isolation
// write nothing; only a rule that went away while the agent was down is
// removed, by FinishPolicyRecovery.
func TestARestartedClientAdoptsThePolicyFlowsInPlace(t *testing.T) {
	br := bridgetest.New(t)
	ctx := context.Background()
	node := &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP, GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}
	first, err := NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Initialize(ctx, node); err != nil {
		t.Fatal(err)
	}
	keep := &PolicyRule{ID: 7, Key: "np1 0/6:80-0", Direction: DirectionIngress, Peers: hostPrefixes(3, "10.20.0.1"),
		AppliedTo: []uint32{10, 11}, Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}}, Priority: PolicyRulePriority}
	gone := &PolicyRule{ID: 9, Key: "np2 0/", Direction: DirectionEgress, Peers: hostPrefixes(2, "10.20.0.2"),
		AppliedTo: []uint32{11}, Priority: PolicyRulePriority}
	apply(t, first, PolicyChange{Rules: []RuleChange{{New: keep}, {New: gone}}, Isolate: [2][]uint32{{10, 11}, {11}}})

	counting := &bridgetest.Counting{Client: br.OF}
	second, err := NewClient(counting, 2)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := second.RecoverPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[keep.Key] != 7 || ids[gone.Key] != 9 {
		t.Fatalf("the conj_id flows should note both rules with their ids, recovered %v", ids)
	}
	again := *keep
	if w := apply(t, second, PolicyChange{Rules: []RuleChange{{New: &again}}, Isolate: [2][]uint32{{10, 11}}}); w.Messages != 0 {
		t.Fatalf("a rule and isolation already in OVS should write nothing, wrote %+v", w)
	}
	if bundles, msgs := counting.Reset(); bundles != 0 || msgs != 0 {
		t.Fatalf("nothing should reach the switch, sent %d bundles with %d messages", bundles, msgs)
	}
	n, err := second.FinishPolicyRecovery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The egress rule: 1 port + 2 peers + conj_id + 2 metric flows; its
	// port's egress isolation.
	if n != 1+2+1+2+1 {
		t.Fatalf("finishing the recovery should delete the 7 flows of the rule and isolation gone, wrote %d", n)
	}
	if got, want := policyFlowsOf(t, br), clientPolicyFlows(second); got != want {
		t.Fatalf("the bridge should hold exactly the restarted client's policy flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
}

// gatedBridge holds every bundle of more than gateAbove messages until
// released (or 10 s passed): a policy bundle the switch is still taking.
type gatedBridge struct {
	*binding.Client
	gateAbove int
	entered   chan struct{}
	release   chan struct{}
	once      sync.Once
}

func (g *gatedBridge) Bundle(ctx context.Context, msgs ...binding.Message) error {
	if len(msgs) > g.gateAbove {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.release:
		case <-time.After(10 * time.Second):
		}
	}
	return g.Client.Bundle(ctx, msgs...)
}

// A pod ADD writes its flows while a large policy bundle is still being
// written: pod and policy flows are serialized apart.
func TestAPodAddCompletesWhileAPolicyBundleIsWritten(t *testing.T) {
	br := bridgetest.New(t)
	gate := &gatedBridge{Client: br.OF, gateAbove: 1000, entered: make(chan struct{}), release: make(chan struct{})}
	c := initializedClient(t, br, gate)
	ctx := context.Background()
	policyDone := make(chan error, 1)
	go func() {
		_, err := c.ApplyPolicyChange(ctx, PolicyChange{Rules: []RuleChange{{New: nxmRule(1, 2000, 2000)}}})
		policyDone <- err
	}()
	<-gate.entered
	pod := br.AddPod(t, "p1", "10.10.1.2/24")
	start := time.Now()
	podDone := make(chan error, 1)
	go func() { podDone <- c.InstallPodFlows(pod.HostIF, []net.IP{pod.IP}, pod.MAC, pod.OFPort) }()
	select {
	case err := <-podDone:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod flows installed in %s while a policy bundle of 4,002 flows was held", time.Since(start))
	case <-time.After(5 * time.Second):
		close(gate.release)
		t.Fatal("the pod's flows waited for the policy bundle")
	}
	close(gate.release)
	if err := <-policyDone; err != nil {
		t.Fatal(err)
	}
	if !c.PodFlowsInstalled(pod.HostIF) {
		t.Fatal("the pod's flows should be recorded")
	}
}
