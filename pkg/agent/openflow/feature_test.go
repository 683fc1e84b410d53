package openflow

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestEveryRegisteredFeatureIsLaidOutAndDeclaresItsPacketInKindsOnce(t *testing.T) {
	c, _ := newUnitClient(t)
	names := map[string]bool{}
	kinds := map[PacketInKind]string{}
	for _, f := range c.Features() {
		if names[f.Name()] {
			t.Fatalf("two features are named %s", f.Name())
		}
		names[f.Name()] = true
		for _, spec := range f.Tables() {
			if tb, ok := c.Pipeline().Lookup(spec.Name); !ok || tb.TableSpec != spec {
				t.Fatalf("table %s of feature %s is not laid out", spec.Name, f.Name())
			}
		}
		for _, k := range f.PacketInKinds() {
			if other, ok := kinds[k]; ok {
				t.Fatalf("packet-in kind %s is declared by %s and %s", k, other, f.Name())
			}
			kinds[k] = f.Name()
		}
	}
	for _, k := range []PacketInKind{PacketInServiceReject, PacketInPolicy, PacketInTraceflow} {
		if _, ok := kinds[k]; !ok {
			t.Fatalf("no feature declares packet-in kind %s", k)
		}
	}
	if len(c.PacketInKinds()) != len(kinds) {
		t.Fatalf("the client should list the features' %d kinds, lists %v", len(kinds), c.PacketInKinds())
	}
	if c.podConnectivity == nil || c.networkPolicy == nil || c.services == nil || c.traceflow == nil {
		t.Fatal("every registered feature with calls of its own should be reachable through the client")
	}
}

// exampleFeature is the smallest feature: one table, one fixed flow, one
// flow it installs on demand.
type exampleFeature struct {
	*datapath
	featureDefaults
	installed []*binding.Flow
	lost      int
}

var exampleTable = &TableSpec{Name: "ExampleMark", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
	Doc: "An example feature's table."}

func (*exampleFeature) Name() string         { return "Example" }
func (*exampleFeature) Tables() []*TableSpec { return []*TableSpec{exampleTable} }
func (e *exampleFeature) FixedFlows(*NodeConfig) []*binding.Flow {
	return []*binding.Flow{e.b.flow(exampleTable, priorityNormal, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).IPProto(17) },
		e.b.next(exampleTable))}
}
func (e *exampleFeature) Installed() ([]*binding.GroupMod, []*binding.Flow) { return nil, e.installed }
func (e *exampleFeature) SwitchLost()                                       { e.lost++ }

func (e *exampleFeature) mark(ctx context.Context, port uint16) error {
	f := e.b.flow(exampleTable, priorityHigh, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).IPProto(17).UDPDst(port) },
		e.b.next(exampleTable))
	var b deltaBatch
	b.add(delta{msgs: addMods([]*binding.Flow{f}), apply: func() func() {
		old := e.installed
		e.installed = append(append([]*binding.Flow(nil), old...), f)
		return func() { e.installed = old }
	}})
	return b.commit(ctx, e.datapath, "example")
}

func TestAFeaturePluggedInGetsItsTableItsFixedFlowsAndItsReplay(t *testing.T) {
	ctx := context.Background()
	br := newRecordingBridge()
	var ex *exampleFeature
	c, err := newClient(br, 1, func(d *datapath) []Feature {
		ex = &exampleFeature{datapath: d}
		return append(registeredFeatures(d), ex)
	})
	if err != nil {
		t.Fatal(err)
	}
	tb, ok := c.Pipeline().Lookup("ExampleMark")
	if !ok || tb.Next() == nil || tb.Next().Stage < PreRoutingStage {
		t.Fatal("the example table should be laid out in PreRouting of the IP pipeline, with a next table")
	}
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac}); err != nil {
		t.Fatal(err)
	}
	// Its miss flow (from the pipeline) and its fixed flow.
	if got := br.inTable(tb); len(got) != 2 {
		t.Fatalf("Initialize should install the example table's miss flow and its fixed flow, the switch holds %q", got)
	}
	if err := ex.mark(ctx, 53); err != nil {
		t.Fatal(err)
	}
	var shown int
	for _, f := range c.Flows() {
		if f.Table == tb.ID {
			shown++
		}
	}
	if shown != 3 {
		t.Fatalf("Flows should show the example table's 3 flows, shows %d", shown)
	}
	fresh := newRecordingBridge()
	if err := c.Replay(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got := fresh.inTable(tb); len(got) != 3 || ex.lost != 1 || !strings.Contains(strings.Join(got, "\n"), "tp_dst=53") {
		t.Fatalf("Replay should tell the feature once and write its 3 flows again, told %d times, wrote %q", ex.lost, got)
	}
}

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
