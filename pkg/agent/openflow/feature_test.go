package openflow

import (
	"context"
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
	installed []*binding.Flow
	lost      int
}

var exampleTable = &TableSpec{Name: "ExampleMark", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
	Doc: "An example feature's table."}

func (*exampleFeature) Name() string                { return "Example" }
func (*exampleFeature) Tables() []*TableSpec        { return []*TableSpec{exampleTable} }
func (*exampleFeature) Meters() []*binding.MeterMod { return nil }
func (e *exampleFeature) FixedFlows(*NodeConfig) []*binding.Flow {
	return []*binding.Flow{e.b.flow(exampleTable, priorityNormal, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).IPProto(17) },
		e.b.next(exampleTable))}
}
func (e *exampleFeature) Installed() ([]*binding.GroupMod, []*binding.Flow) { return nil, e.installed }
func (e *exampleFeature) SwitchLost()                                       { e.lost++ }
func (*exampleFeature) PacketInKinds() []PacketInKind                       { return nil }

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
