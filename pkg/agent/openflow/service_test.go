package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// groupBridge is recordingBridge with groups: it applies group mods as OVS
// would (add fails on an existing id, modify and delete on a missing one) and
// keeps every bundle's messages, so tests see exactly what went out.
type groupBridge struct {
	*recordingBridge
	mu      sync.Mutex
	groups  map[uint32]*binding.GroupMod
	written [][]binding.Message
}

func newGroupBridge() *groupBridge {
	return &groupBridge{recordingBridge: newRecordingBridge(), groups: map[uint32]*binding.GroupMod{}}
}

func (g *groupBridge) Bundle(ctx context.Context, msgs ...binding.Message) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	groups := map[uint32]*binding.GroupMod{}
	for id, gm := range g.groups {
		groups[id] = gm
	}
	var flows []binding.Message
	for _, m := range msgs {
		if fm, ok := m.(*binding.FlowMod); ok && fm.Command == binding.FlowModifyStrict {
			m = binding.AddFlow(&fm.Flow) // the same, to the flow map underneath
		}
		gm, ok := m.(*binding.GroupMod)
		if !ok {
			flows = append(flows, m)
			continue
		}
		switch {
		case gm.Command == binding.GroupDelete && gm.GroupID == binding.GroupIDAll:
			groups = map[uint32]*binding.GroupMod{}
		case gm.Command == binding.GroupAdd && groups[gm.GroupID] != nil:
			return fmt.Errorf("group %d exists", gm.GroupID)
		case gm.Command != binding.GroupAdd && groups[gm.GroupID] == nil:
			return fmt.Errorf("group %d unknown", gm.GroupID)
		case gm.Command == binding.GroupDelete:
			delete(groups, gm.GroupID)
		case gm.Command == binding.GroupInsertBucket:
			g := *groups[gm.GroupID]
			g.Buckets = append(append([]binding.Bucket(nil), g.Buckets...), gm.Buckets...)
			groups[gm.GroupID] = &g
		default:
			groups[gm.GroupID] = gm
		}
	}
	if err := g.recordingBridge.Bundle(ctx, flows...); err != nil {
		return err
	}
	g.groups = groups
	g.written = append(g.written, msgs)
	return nil
}

// groupStrings prints the groups as dump-groups does, by id.
func (g *groupBridge) groupStrings() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, gm := range g.groups {
		a := *gm
		a.Command = binding.GroupAdd
		out = append(out, a.String())
	}
	bridgetest.SortGroups(out)
	return out
}

// last returns the messages of the last bundle, one line each: "add",
// "delete" or "modify", then the flow or group as dump-flows and dump-groups
// print them.
func (g *groupBridge) last() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.written) == 0 {
		return nil
	}
	var out []string
	for _, m := range g.written[len(g.written)-1] {
		switch m := m.(type) {
		case *binding.FlowMod:
			if m.Command == binding.FlowDelete {
				out = append(out, m.String()) // DEL with its cookie mask
				continue
			}
			verb := map[binding.FlowModCommand]string{binding.FlowAdd: "add", binding.FlowDeleteStrict: "delete", binding.FlowModifyStrict: "modify"}[m.Command]
			out = append(out, verb+" "+m.Flow.String())
		case *binding.GroupMod:
			verb := map[binding.GroupModCommand]string{binding.GroupAdd: "add", binding.GroupModify: "modify", binding.GroupDelete: "delete"}[m.Command]
			out = append(out, verb+" "+m.String())
		default:
			out = append(out, fmt.Sprint(m))
		}
	}
	return out
}

func (g *groupBridge) bundleCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.written)
}

func newServiceUnitClient(t *testing.T) (*Client, *groupBridge) {
	t.Helper()
	br := newGroupBridge()
	c, err := NewClient(br, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), testNode()); err != nil {
		t.Fatal(err)
	}
	return c, br
}

func testNode() *NodeConfig {
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	return &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac}
}

var (
	webTCP = ServicePort{IP: netip.MustParseAddr("10.96.0.10"), Protocol: 6, Port: 80}
	webUDP = ServicePort{IP: netip.MustParseAddr("10.96.0.10"), Protocol: 17, Port: 53}
	ep1    = Endpoint{IP: netip.MustParseAddr("10.10.1.3"), Port: 8080, Local: true}
	ep2    = Endpoint{IP: netip.MustParseAddr("10.10.2.3"), Port: 8080}
)

func TestAServiceIsOneBundleOfGroupsAndFlows(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	before := br.bundleCount()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep2, ep1}}}); err != nil {
		t.Fatal(err)
	}
	if br.bundleCount() != before+1 {
		t.Fatalf("installing a Service should write one bundle, wrote %d", br.bundleCount()-before)
	}
	lb, dnat := c.p.Table(ServiceLBTable).ID, c.p.Table(EndpointDNATTable).ID
	next := c.p.Table(EndpointDNATTable).Next().ID
	want := []string{
		// DNAT flows first: the group's buckets resubmit to them.
		fmt.Sprintf("add cookie=0x5ec1000000000000, table=%d, priority=200,tcp,reg3=0xa0a0103,reg4=0x11f90/0x1ffff actions=set_field:0x200/0x200->reg0,ct(commit,table=%d,zone=65520,nat(dst=10.10.1.3:8080),exec(set_field:0x1/0x1->ct_mark))", dnat, next),
		fmt.Sprintf("add cookie=0x5ec1000000000000, table=%d, priority=210,tcp,reg3=0xa0a0103,reg4=0x11f90/0x1ffff,nw_src=10.10.1.3 actions=set_field:0x200/0x200->reg0,set_field:0x400/0x400->reg0,ct(commit,table=%d,zone=65520,nat(dst=10.10.1.3:8080),exec(set_field:0x1/0x1->ct_mark,set_field:0x2/0x2->ct_mark))", dnat, next),
		fmt.Sprintf("add cookie=0x5ec1000000000000, table=%d, priority=200,tcp,reg3=0xa0a0203,reg4=0x11f90/0x1ffff actions=set_field:0x200/0x200->reg0,ct(commit,table=%d,zone=65520,nat(dst=10.10.2.3:8080),exec(set_field:0x1/0x1->ct_mark))", dnat, next),
		// Then the group (buckets sorted by endpoint), then the flow using
		// it, which notes the digest of the group's content. Port flows
		// carry no cookie round: an agent restart keeps them.
		fmt.Sprintf("add group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=set_field:0xa0a0103->reg3,set_field:0x1f90/0xffff->reg4,set_field:0x10000/0x10000->reg4,resubmit(,%d),bucket=bucket_id:1,weight:100,actions=set_field:0xa0a0203->reg3,set_field:0x1f90/0xffff->reg4,set_field:0x10000/0x10000->reg4,resubmit(,%d)", dnat, dnat),
		fmt.Sprintf("add cookie=0x5ec1000000000000, table=%d, priority=200,ct_state=+new+trk,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=%s,group:1", lb, (&binding.Note{Data: groupDigest(c.Groups()[0])}).String()),
	}
	if got := br.last(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the bundle should add the DNAT flows, the group and the ServiceLB flow, in that order\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The same state again writes nothing.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}}}); err != nil {
		t.Fatal(err)
	}
	if br.bundleCount() != before+1 {
		t.Fatal("re-installing an unchanged Service should write nothing")
	}
}

func TestRemovingAnEndpointModifiesTheGroupAndDeletesItsFlow(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	got := br.last()
	if len(got) != 3 || !strings.HasPrefix(got[0], "modify group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=set_field:0xa0a0103->reg3") ||
		strings.Contains(got[0], "bucket_id:1") || !strings.HasPrefix(got[1], "modify cookie=0x5ec1000000000000, table=") || !strings.Contains(got[1], ",group:1") ||
		!strings.HasPrefix(got[2], "delete ") || !strings.Contains(got[2], "nat(dst=10.10.2.3:8080)") {
		t.Fatalf("removing an endpoint should be one group modify with one bucket, the modify of the ServiceLB flow's note (the group's digest) and the delete of that endpoint's DNAT flow, got:\n%s", strings.Join(got, "\n"))
	}
	// No endpoint left: the group stays, with one bucket that marks the
	// packet for rejection; it no longer uses the endpoint's DNAT flow.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {}}); err != nil {
		t.Fatal(err)
	}
	dnat := c.p.Table(EndpointDNATTable).ID
	if g, want := br.groupStrings(), fmt.Sprintf("group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=set_field:0x20000/0x20000->reg4,resubmit(,%d)", dnat); len(g) != 1 || g[0] != want {
		t.Fatalf("a port without endpoints should keep its group with a reject bucket\nhave %q\nwant %q", g, want)
	}
	if eps := endpointDNATFlows(br, c); len(eps) != 0 {
		t.Fatalf("no DNAT flow should remain:\n%s", strings.Join(eps, "\n"))
	}
	// A port whose traffic policy drops without endpoints has an empty group.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {NoEndpoints: Drop}}); err != nil {
		t.Fatal(err)
	}
	if g := br.groupStrings(); len(g) != 1 || g[0] != "group_id=1,type=select,selection_method=dp_hash" {
		t.Fatalf("a port that drops without endpoints should have an empty group, have %q", g)
	}
	if got := br.last(); len(got) != 2 || !strings.HasPrefix(got[0], "modify group_id=1,") || !strings.Contains(got[1], ",group:1") {
		t.Fatalf("switching from reject to drop should be one group modify and the note of its ServiceLB flow, got:\n%s", strings.Join(got, "\n"))
	}
}

// endpointDNATFlows are the per-endpoint flows of EndpointDNAT (not its
// miss and reject flows).
func endpointDNATFlows(br *groupBridge, c *Client) []string {
	var out []string
	for _, f := range br.inTable(c.p.Table(EndpointDNATTable)) {
		if strings.Contains(f, "nat(dst=") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func TestAnEndpointSharedByTwoServicesKeepsItsFlowUntilBothAreGone(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	other := ServicePort{IP: netip.MustParseAddr("10.96.0.11"), Protocol: 6, Port: 8080}
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallService(ctx, "default/web2", ServiceState{other: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	if got := br.last(); len(got) != 2 {
		t.Fatalf("the second Service should add only its group and ServiceLB flow (the DNAT flows exist), got:\n%s", strings.Join(got, "\n"))
	}
	if err := c.UninstallService(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if got := br.last(); len(got) != 2 || !strings.HasPrefix(got[0], "delete ") || !strings.Contains(got[0], "nw_dst=10.96.0.10") || !strings.HasPrefix(got[1], "delete group_id=1") {
		t.Fatalf("removing the first Service should delete only its ServiceLB flow and then its group, got:\n%s", strings.Join(got, "\n"))
	}
	if err := c.UninstallService(ctx, "default/web2"); err != nil {
		t.Fatal(err)
	}
	if g := br.groupStrings(); len(g) != 0 {
		t.Fatalf("no group should remain, have %q", g)
	}
	if got := endpointDNATFlows(br, c); len(got) != 0 {
		t.Fatalf("EndpointDNAT should have no endpoint flow left, has:\n%s", strings.Join(got, "\n"))
	}
}

func TestAPortClaimedByAnotherServiceIsRefused(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}, webUDP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	n := br.bundleCount()
	if err := c.InstallService(ctx, "default/other", ServiceState{webTCP: {Endpoints: []Endpoint{ep2}}}); err == nil {
		t.Fatal("a ClusterIP port installed for another Service should be refused")
	}
	if br.bundleCount() != n {
		t.Fatal("a refused Service should write nothing")
	}
	// Once the first Service lets the port go, the other gets it.
	if err := c.InstallService(ctx, "default/web", ServiceState{webUDP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallService(ctx, "default/other", ServiceState{webTCP: {Endpoints: []Endpoint{ep2}}}); err != nil {
		t.Fatal(err)
	}
}

func TestReplayAddsGroupsBeforeTheFlowsThatUseThem(t *testing.T) {
	c, _ := newServiceUnitClient(t)
	ctx := context.Background()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}}, webUDP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	fresh := newGroupBridge()
	if err := c.Replay(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	msgs := fresh.last()
	if !strings.HasPrefix(msgs[0], "delete group_id=4294967292") || !strings.HasPrefix(msgs[1], "add group_id=1,") || !strings.HasPrefix(msgs[2], "add group_id=2,") {
		t.Fatalf("replay should delete all groups, then add the groups, then the flows; starts with:\n%s", strings.Join(msgs[:3], "\n"))
	}
	if got, want := strings.Join(fresh.groupStrings(), "\n"), strings.Join(groupStrings(c.Groups()), "\n"); got != want {
		t.Fatalf("replayed groups\n%s\nwant\n%s", got, want)
	}
	if got, want := len(fresh.recordingBridge.flows), len(c.Flows()); got != want {
		t.Fatalf("replayed %d flows, the client has %d", got, want)
	}
}

func TestAFailedServiceWriteLeavesTheRecordUnchanged(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	// The switch lost the group behind the client's back: the modify fails.
	br.mu.Lock()
	delete(br.groups, 1)
	br.mu.Unlock()
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}}}); err == nil {
		t.Fatal("the write should fail")
	}
	if g := groupStrings(c.Groups()); len(g) != 1 || strings.Contains(g[0], "bucket_id:1") {
		t.Fatalf("after a failed write the client should still record one bucket, has %q", g)
	}
}

func TestAnEndpointSeenLocalByOneServiceOnlyKeepsItsDNATFlowWithoutHairpin(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	other := ServicePort{IP: netip.MustParseAddr("10.96.0.11"), Protocol: 6, Port: 8080}
	remoteView := ep1
	remoteView.Local = false // a slice without nodeName
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallService(ctx, "default/web2", ServiceState{other: {Endpoints: []Endpoint{remoteView}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.UninstallService(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	got := endpointDNATFlows(br, c)
	if len(got) != 1 || !strings.Contains(strings.Join(got, "\n"), "priority=200,tcp,reg3=0xa0a0103") || strings.Contains(strings.Join(got, "\n"), "nw_src=") {
		t.Fatalf("the endpoint's DNAT flow should stay for web2, its hairpin flow should go with web; EndpointDNAT has:\n%s", strings.Join(got, "\n"))
	}
}

// linesWith returns the lines of msgs that contain every part.
func linesWith(msgs []string, parts ...string) []string {
	var out []string
	for _, m := range msgs {
		ok := true
		for _, p := range parts {
			if !strings.Contains(m, p) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func TestSessionAffinityFlowsFollowThePort(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	sa, dnat := c.p.Table(SessionAffinityTable).ID, c.p.Table(EndpointDNATTable).ID
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}, AffinityTimeout: 10800}}); err != nil {
		t.Fatal(err)
	}
	got := br.last()
	if g := linesWith(got, "add group_id=1,"); len(g) != 1 || strings.Count(g[0], fmt.Sprintf("set_field:0x80000/0x80000->reg4,resubmit(,%d)", sa)) != 2 ||
		strings.Contains(g[0], fmt.Sprintf("resubmit(,%d)", dnat)) {
		t.Fatalf("each bucket of an affinity port should resubmit to its learn flow in SessionAffinity (and not to EndpointDNAT), got:\n%s", strings.Join(got, "\n"))
	}
	for _, want := range []string{
		fmt.Sprintf("priority=210,ct_state=+new+trk,tcp,reg4=0/0x40000,nw_dst=10.96.0.10,tp_dst=80 actions=set_field:0x40000/0x40000->reg4,resubmit(,%d),goto_table:%d", sa, sa+1),
		"priority=230,ct_state=-inv+trk,ct_nw_proto=6,ct_tp_src=0,tcp,reg4=0x40000/0x40000,nw_dst=10.96.0.10,tp_dst=80 actions=drop",
		fmt.Sprintf("priority=210,tcp,reg3=0xa0a0103,reg4=0x81f90/0x8ffff,nw_dst=10.96.0.10,tp_dst=80 actions=learn(table=%d,idle_timeout=10800,priority=200,cookie=0x5ec21f900a0a0103,", sa),
		"cookie=0x5ec21f900a0a0203,",
	} {
		if len(linesWith(got, "add ", want)) != 1 {
			t.Fatalf("installing an affinity port should add a flow with %q, got:\n%s", want, strings.Join(got, "\n"))
		}
	}

	// A timeout above what OpenFlow holds: the learn flows lose their idle
	// timeout (the agent ages), the flows learned with the old timeout go;
	// the group does not change.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}, AffinityTimeout: 86400}}); err != nil {
		t.Fatal(err)
	}
	got = br.last()
	if len(linesWith(got, "group_id=")) != 0 || len(linesWith(got, "modify ", "actions=learn(")) != 2 || len(linesWith(got, "idle_timeout")) != 0 {
		t.Fatalf("86400 s should modify both learn flows to have no idle_timeout and leave the group, got:\n%s", strings.Join(got, "\n"))
	}
	if del := linesWith(got, "DEL ", fmt.Sprintf("table:%d", sa)); len(del) != 1 || !strings.Contains(del[0], "cookie:0x5ec2000000000000/0xffff000000000000") {
		t.Fatalf("a new timeout should delete the port's learned flows (by the learned tag), got:\n%s", strings.Join(got, "\n"))
	}

	// ep2 leaves: its bucket, its learn flow and the flows it taught go.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}, AffinityTimeout: 86400}}); err != nil {
		t.Fatal(err)
	}
	got = br.last()
	if len(linesWith(got, "modify group_id=1,")) != 1 || len(linesWith(got, "delete ", "cookie=0x5ec21f900a0a0203,")) != 1 {
		t.Fatalf("removing ep2 should modify the group and delete its learn flow, got:\n%s", strings.Join(got, "\n"))
	}
	if del := linesWith(got, "DEL ", "cookie:0x5ec21f900a0a0203/"); len(del) != 1 || !strings.Contains(del[0], "nw_dst=10.96.0.10,tp_dst=80") {
		t.Fatalf("removing ep2 should delete the flows learned for ep2 on this port only, got:\n%s", strings.Join(got, "\n"))
	}

	// Affinity off: the lookup, exact and learn flows, and every flow learned, go.
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	got = br.last()
	if len(linesWith(got, "delete ", fmt.Sprintf("table=%d", sa))) != 3 || len(linesWith(got, "DEL ", "cookie:0x5ec2000000000000/0xffff000000000000")) != 1 {
		t.Fatalf("affinity off should delete the port's three SessionAffinity flows and its learned flows, got:\n%s", strings.Join(got, "\n"))
	}
	if g := br.groupStrings(); len(g) != 1 || strings.Contains(g[0], "0x80000/0x80000->reg4") || !strings.Contains(g[0], fmt.Sprintf("resubmit(,%d)", dnat)) {
		t.Fatalf("without affinity the bucket should resubmit to EndpointDNAT, have %q", g)
	}
}

// dumpingBridge is a groupBridge that also answers flow dumps of learned
// flows, as the switch would with their idle times.
type dumpingBridge struct {
	*groupBridge
	learned []binding.FlowStats
}

func (d *dumpingBridge) DumpFlows(_ context.Context, table uint8, cookie, mask uint64) ([]binding.FlowStats, error) {
	var out []binding.FlowStats
	for _, fs := range d.learned {
		if fs.Table == table && fs.Cookie&mask == cookie&mask {
			out = append(out, fs)
		}
	}
	return out, nil
}

func learnedFlow(c *Client, p ServicePort, client string, e Endpoint, idle uint32) binding.FlowStats {
	f := binding.Flow{Table: c.p.Table(SessionAffinityTable).ID, Priority: priorityNormal, Cookie: affinityCookie(e)}
	f.Match.EthType(binding.EthTypeIPv4).IPProto(p.Protocol).IPSrc(netip.MustParseAddr(client)).IPDst(p.IP)
	if p.Protocol == binding.IPProtoUDP {
		f.Match.UDPDst(p.Port)
	} else {
		f.Match.TCPDst(p.Port)
	}
	matchField(&f.Match, AffinityLookupField, 1)
	return binding.FlowStats{Flow: f, IdleSec: idle, HasIdle: true}
}

func TestTheAgentAgesAffinitiesLongerThanOpenFlowHolds(t *testing.T) {
	br := &dumpingBridge{groupBridge: newGroupBridge()}
	c, err := NewClient(br, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Initialize(ctx, testNode()); err != nil {
		t.Fatal(err)
	}
	day := ServicePort{IP: netip.MustParseAddr("10.96.0.12"), Protocol: 6, Port: 80}
	if err := c.InstallService(ctx, "default/day", ServiceState{day: {Endpoints: []Endpoint{ep1}, AffinityTimeout: 86400}}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallService(ctx, "default/hour", ServiceState{webUDP: {Endpoints: []Endpoint{ep1}, AffinityTimeout: 3600}}); err != nil {
		t.Fatal(err)
	}
	br.learned = []binding.FlowStats{
		learnedFlow(c, day, "10.10.1.7", ep1, 86399),   // used 86399 s ago: kept
		learnedFlow(c, day, "10.10.1.8", ep1, 86400),   // a day: expired
		learnedFlow(c, webUDP, "10.10.1.9", ep1, 7200), // the switch's idle_timeout ages this port
		learnedFlow(c, webTCP, "10.10.1.9", ep1, 9e5),  // no such port (yet): left alone
	}
	n, err := c.AgeSessionAffinity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := br.last()
	if n != 1 || len(got) != 1 || !strings.HasPrefix(got[0], "delete ") || !strings.Contains(got[0], "nw_src=10.10.1.8") {
		t.Fatalf("only the day-old affinity should be deleted (%d), got:\n%s", n, strings.Join(got, "\n"))
	}
}

func TestAnExternalPortSelectsTrafficFromOutsideTheNodeAboveThePodsOne(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	ext := ServicePort{IP: netip.MustParseAddr("192.168.100.10"), Protocol: 6, Port: 80}
	outside := ext
	outside.External = true
	if err := c.InstallService(ctx, "default/web", ServiceState{
		ext:     {Endpoints: []Endpoint{ep1, ep2}},
		outside: {Endpoints: []Endpoint{ep1}, AffinityTimeout: 60},
	}); err != nil {
		t.Fatal(err)
	}
	got := br.last()
	lb := linesWith(got, "add ", ",group:")
	if all := strings.Join(lb, "\n"); len(lb) != 2 || !strings.Contains(all, "priority=200,ct_state=+new+trk,tcp,nw_dst=192.168.100.10,tp_dst=80 actions=note:") ||
		!strings.Contains(all, "priority=205,ct_state=+new+trk,tcp,reg0=0x800/0x800,nw_dst=192.168.100.10,tp_dst=80 actions=note:") {
		t.Fatalf("the port for outside traffic should match traffic from outside the node (reg0[11]), above the pods' port, got:\n%s", strings.Join(lb, "\n"))
	}
	for _, want := range []string{"priority=215,ct_state=+new+trk,tcp,reg0=0x800/0x800,reg4=0/0x40000", "priority=235,", "priority=215,tcp,reg0=0x800/0x800,reg3=0xa0a0103"} {
		if len(linesWith(got, "add ", want)) != 1 {
			t.Fatalf("the outside port's affinity flows should match outside traffic and rank 5 above, want %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
	// Its learned flows are the address's, whoever the client: deleting them
	// does not select outside traffic.
	if err := c.InstallService(ctx, "default/web", ServiceState{ext: {Endpoints: []Endpoint{ep1, ep2}}, outside: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	if del := linesWith(br.last(), "DEL "); len(del) != 1 || strings.Contains(del[0], "reg0") {
		t.Fatalf("switching the outside port's affinity off should delete the learned flows of the address, got:\n%s", strings.Join(br.last(), "\n"))
	}
}
