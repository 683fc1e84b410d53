package openflow

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestARefusedPolicyBundleLeavesTheRecordAsItWasAndTheRetryWritesItAll(t *testing.T) {
	c, br := newUnitClient(t)
	r := &PolicyRule{ID: 1, Key: "np1 0/", Direction: DirectionIngress, Peers: hostPrefixes(3, "10.20.0.1"),
		AppliedTo: []uint32{10, 11}, Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}}, Priority: PolicyRulePriority}
	apply(t, c, PolicyChange{Rules: []RuleChange{{New: r}}, Isolate: [2][]uint32{{10}}})
	before := clientPolicyFlows(c)

	wider := *r
	wider.Peers = hostPrefixes(5, "10.20.0.1")
	change := PolicyChange{Rules: []RuleChange{{Old: r, New: &wider}}, Release: [2][]uint32{{10}}, Isolate: [2][]uint32{{11}}}
	br.refuse = errors.New("switch refused the bundle")
	if _, err := c.ApplyPolicyChange(context.Background(), change); err == nil {
		t.Fatal("the change should fail with the bundle")
	}
	if got := clientPolicyFlows(c); got != before {
		t.Fatalf("after a refused bundle the client should record what it did before:\n%s\nit records\n%s", before, got)
	}
	br.refuse = nil
	w := apply(t, c, change)
	// 2 new peers, one port's drop removed and another's added.
	if w.Messages != 2+1+1 {
		t.Fatalf("the retry should write the whole difference (4 flow mods), wrote %+v", w)
	}
	var onSwitch []string
	for _, tb := range []*TableSpec{IngressRuleTable, IngressDefaultRuleTable, IngressMetricTable} {
		for _, f := range br.inTable(c.p.Table(tb)) {
			if strings.Contains(f, "cookie=0x9011") {
				onSwitch = append(onSwitch, f)
			}
		}
	}
	if got := len(strings.Split(clientPolicyFlows(c), "\n")); got != len(onSwitch) {
		t.Fatalf("the client records %d policy flows, the switch holds %d:\n%s", got, len(onSwitch), strings.Join(onSwitch, "\n"))
	}
}

func TestARefusedPodBundleRecordsNothingAndTheRetryInstallsThePod(t *testing.T) {
	c, br := newUnitClient(t)
	mac, _ := net.ParseMAC("0a:00:00:00:01:05")
	br.refuse = errors.New("switch refused the bundle")
	if err := c.InstallPodFlows("veth-a", []net.IP{net.ParseIP("10.10.1.5")}, mac, 5); err == nil {
		t.Fatal("the pod's install should fail with the bundle")
	}
	if c.PodFlowsInstalled("veth-a") {
		t.Fatal("a pod whose bundle was refused should not be recorded")
	}
	br.refuse = nil
	if err := c.InstallPodFlows("veth-a", []net.IP{net.ParseIP("10.10.1.5")}, mac, 5); err != nil {
		t.Fatal(err)
	}
	if !c.PodFlowsInstalled("veth-a") || len(br.inTable(c.p.Table(SpoofGuardTable))) == 0 {
		t.Fatal("the retry should install and record the pod")
	}
}

func TestADeltaBatchRevertsEveryRecordNewestFirst(t *testing.T) {
	m := map[string]int{"a": 1}
	var b deltaBatch
	for _, step := range []struct {
		k   string
		v   int
		del bool
	}{{"a", 2, false}, {"b", 3, false}, {"a", 0, true}} {
		b.add(delta{msgs: []binding.Message{binding.DeleteFlows(binding.TableAll, 0, 0)}, apply: func() func() {
			e := editOf(m)
			if step.del {
				e.del(step.k)
			} else {
				e.set(step.k, step.v)
			}
			return e.revert
		}})
	}
	if len(m) != 1 || m["b"] != 3 || len(b.msgs) != 3 {
		t.Fatalf("each delta should be applied when added: %v, %d messages", m, len(b.msgs))
	}
	b.revert()
	if len(m) != 1 || m["a"] != 1 {
		t.Fatalf("revert should restore the map as it was, got %v", m)
	}
}
