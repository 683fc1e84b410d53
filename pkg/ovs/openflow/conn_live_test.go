package openflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// addVethPort adds a veth pair in the instance's netns and plugs one end
// into the bridge as OpenFlow port ofport; it returns the peer's name.
func addVethPort(t *testing.T, in *ovsinstance.Instance, name string, ofport int) string {
	t.Helper()
	peer := name + "-peer"
	// Both ends stay silent (no IPv6 autoconfiguration, no ARP), so the
	// peer counts only what OVS sends.
	for _, args := range [][]string{
		{"ip", "link", "add", name, "type", "veth", "peer", "name", peer},
		{"sysctl", "-qw", "net.ipv6.conf." + name + ".disable_ipv6=1"},
		{"sysctl", "-qw", "net.ipv6.conf." + peer + ".disable_ipv6=1"},
		{"ip", "link", "set", name, "arp", "off", "up"},
		{"ip", "link", "set", peer, "arp", "off", "up"},
	} {
		if _, err := in.Run(args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Vsctl("add-port", testBridge, name, "--", "set", "interface", name, "ofport_request="+strconv.Itoa(ofport)); err != nil {
		t.Fatal(err)
	}
	return peer
}

// udpFrame builds an Ethernet/IPv4/UDP frame from 10.0.0.1 to 10.0.0.2.
func udpFrame(payload string) []byte { return udpFrameFrom(1, payload) }

// udpFrameFrom builds an Ethernet/IPv4/UDP frame from 10.0.1.src to 10.0.0.2.
func udpFrameFrom(src byte, payload string) []byte {
	b := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, src, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := []byte{0x30, 0x39, 0x00, 0x50, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	b = append(append(b, ip...), udp...)
	return append(b, payload...)
}

// packetOut hand-encodes an OpenFlow 1.5 OFPT_PACKET_OUT from the
// controller port with the given actions and packet.
func packetOut(frame []byte, actions ...[]byte) Message {
	var acts []byte
	for _, a := range actions {
		acts = append(acts, a...)
	}
	b := binary.BigEndian.AppendUint32(nil, 0xffffffff) // no buffer
	b = binary.BigEndian.AppendUint16(b, uint16(len(acts)))
	b = append(b, 0, 0)
	b = appendOXMMatch(b, oxmInPort(ofppController))
	b = append(b, acts...)
	return &RawMessage{Type: 13, Body: append(b, frame...)}
}

// packetIn2Prop returns the value of a property of an NXT_PACKET_IN2 frame.
func packetIn2Prop(t *testing.T, f Frame, typ uint16) []byte {
	t.Helper()
	props := f.Body[8:]
	for len(props) >= 4 {
		pt, n := binary.BigEndian.Uint16(props), int(binary.BigEndian.Uint16(props[2:]))
		if n < 4 || n > len(props) {
			t.Fatalf("bad packet-in2 property length %d", n)
		}
		if pt == typ {
			return props[4:n]
		}
		props = props[min((n+7)&^7, len(props)):]
	}
	return nil
}

func ifaceCounter(t *testing.T, in *ovsinstance.Instance, dev, counter string) int {
	t.Helper()
	out, err := in.Run("cat", "/sys/class/net/"+dev+"/statistics/"+counter)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAControllerFlowYieldsAPacketInWithItsUserdata(t *testing.T) {
	in, mgmt := startBridge(t)
	if _, err := in.Ofctl("add-flow", testBridge, "table=0,priority=10,udp,actions=controller(userdata=01.02.03.04.05)"); err != nil {
		t.Fatal(err)
	}
	frame := udpFrame("hello controller")
	tests := []struct {
		name    string
		version uint8
		out     Message
	}{
		{"over 1.5 with a hand-encoded packet-out", Version15, packetOut(frame, actOutput(ofppTable))},
		{"over 1.5 with the typed packet-out", Version15, &PacketOut{Actions: []Action{&Output{Port: PortTable}}, Data: frame}},
		{"over 1.3 with the typed packet-out", Version13, &PacketOut{Actions: []Action{&Output{Port: PortTable}}, Data: frame}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dialForTest(t, mgmt, Options{Versions: []uint8{tc.version}, AsyncMessages: true})
			// output:TABLE runs the packet through the pipeline, where it meets the controller flow.
			if err := c.Apply(testCtx(t), tc.out); err != nil {
				t.Fatal(err)
			}
			select {
			case f := <-c.PacketIns():
				if !IsPacketIn2(f) {
					t.Fatalf("want an NXT_PACKET_IN2, got type %d", f.Header.Type)
				}
				if ud := packetIn2Prop(t, f, 7); !bytes.Equal(ud, []byte{1, 2, 3, 4, 5}) {
					t.Fatalf("userdata %x, want 0102030405", ud)
				}
				p, err := DecodeAnyPacketIn(f)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p.UserData, []byte{1, 2, 3, 4, 5}) || !bytes.Equal(p.Data, frame) {
					t.Fatalf("decoded packet-in: userdata %x, packet %x", p.UserData, p.Data)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no packet-in")
			}
		})
	}
}

func TestAPacketOutReachesItsPort(t *testing.T) {
	in, mgmt := startBridge(t)
	peer := addVethPort(t, in, "ofc-p1", 1)
	c := dialForTest(t, mgmt, Options{})
	before := ifaceCounter(t, in, peer, "rx_packets")
	const n = 5
	for range n {
		if err := c.Apply(testCtx(t), packetOut(udpFrame("to port 1"), actOutput(1))); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel counts the frames on the far end of the veth shortly after
	// OVS sends them; poll a bounded number of times.
	got := 0
	for range 100 {
		if got = ifaceCounter(t, in, peer, "rx_packets") - before; got >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != n {
		t.Fatalf("%s received %d packets, want %d", peer, got, n)
	}

	for _, version := range []uint8{Version15, Version13} {
		t.Run(fmt.Sprintf("port desc and port stats show it over version %#x", version), func(t *testing.T) {
			c := dialForTest(t, mgmt, Options{Versions: []uint8{version}})
			ports, err := c.PortDesc(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			idx := slices.IndexFunc(ports, func(p PortDesc) bool { return p.PortNo == 1 })
			if idx < 0 || ports[idx].Name != "ofc-p1" {
				t.Fatalf("port desc lacks port 1 named ofc-p1: %+v", ports)
			}
			stats, err := c.PortStats(testCtx(t), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(stats) != 1 || stats[0].PortNo != 1 || stats[0].TxPackets < n {
				t.Fatalf("port stats of port 1 should count at least %d sent packets: %+v", n, stats)
			}
			tables, err := c.TableStats(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) < 250 || tables[0].TableID != 0 {
				t.Fatalf("want stats of every table, got %d", len(tables))
			}
		})
	}
}

func TestASelectGroupSpreadsTraffic(t *testing.T) {
	_, mgmt := startBridge(t)
	c := dialForTest(t, mgmt, Options{})
	ctx := testCtx(t)
	const nBuckets, nPackets = 4, 200
	g := &GroupMod{Command: GroupAdd, Type: GroupSelect, GroupID: 1, SelectionMethod: "hash", Fields: []Field{FieldIPv4Src}}
	for i := range nBuckets {
		g.Buckets = append(g.Buckets, Bucket{Weight: 100, Actions: []Action{ResubmitToTable(uint8(10 + i))}})
	}
	if err := c.Bundle(ctx, g); err != nil {
		t.Fatal(err)
	}
	var outs []Message
	for i := range nPackets {
		outs = append(outs, &PacketOut{Actions: []Action{&Group{ID: 1}}, Data: udpFrameFrom(byte(i), "spread")})
	}
	if err := c.Apply(ctx, outs...); err != nil {
		t.Fatal(err)
	}
	stats, err := c.GroupStats(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || len(stats[0].Buckets) != nBuckets {
		t.Fatalf("want stats of one group with %d buckets, got %+v", nBuckets, stats)
	}
	desc, err := c.GroupDesc(ctx, GroupIDAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 1 || desc[0].GroupID != 1 || desc[0].Type != GroupSelect || len(desc[0].Buckets) != nBuckets {
		t.Fatalf("group desc should show the select group with %d buckets: %+v", nBuckets, desc)
	}
	total := uint64(0)
	for i, bs := range stats[0].Buckets {
		// 200 distinct sources over 4 equal buckets: an empty bucket has
		// probability 4*(3/4)^200, i.e. never.
		if bs.PacketCount == 0 {
			t.Fatalf("bucket %d got no packets: %+v", i, stats[0].Buckets)
		}
		total += bs.PacketCount
	}
	if total != nPackets {
		t.Fatalf("buckets counted %d packets, want %d", total, nPackets)
	}
	t.Logf("packets per bucket: %+v", stats[0].Buckets)
}

func TestDialOverTCP(t *testing.T) {
	in, _ := startBridge(t)
	if _, err := in.Vsctl("set-controller", testBridge, "ptcp:16653:127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	// The listener lives in the instance's netns: dial from a thread that
	// enters it; the socket keeps working from any thread afterwards.
	var c *Conn
	var err error
	for range 200 { // ovs-vswitchd opens the listener shortly after the change
		c, err = dialInNetNS(t, in.NetNS(), "tcp:127.0.0.1:16653")
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		out, _ := in.Run("ss", "-ltn")
		t.Fatalf("%v; listeners in %s:\n%s", err, in.NetNS(), out)
	}
	defer c.Close()
	if c.Version() != Version15 {
		t.Fatalf("negotiated %#x", c.Version())
	}
	if err := c.Bundle(testCtx(t), addIPFlow(0, 7, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if flows := dumpFlows(t, in); len(flows) != 1 {
		t.Fatalf("want the flow added over TCP, got %q", flows)
	}
}

func dialInNetNS(t *testing.T, ns, addr string) (*Conn, error) {
	type result struct {
		nc  net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Enter the netns on a locked thread and come back before unlocking.
		// The thread must not die here: ovsinstance starts its daemons with
		// Pdeathsig, which fires when the forking *thread* exits, and this
		// thread may be that one.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		nc, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "tcp:"), 5*time.Second)
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{nc, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	c, err := NewConn(testCtx(t), r.nc, Options{})
	if err != nil {
		r.nc.Close()
	}
	return c, err
}

// ipFlow is "table=T, priority=100, cookie=C, ip,nw_src=10.0.x.y actions=output:port"
// built with the package's typed flow API.
func ipFlow(table uint8, cookie uint64, x, y byte, port uint32) *Flow {
	f := &Flow{Table: table, Priority: 100, Cookie: cookie, Actions: []Action{&Output{Port: port}}}
	f.Match.IPSrc(netip.AddrFrom4([4]byte{10, 0, x, y}))
	return f
}

func flowStrings(flows []*Flow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, f.String())
	}
	slices.Sort(out)
	return out
}

func TestAVSwitchdRestartIsNoticedAndTheReplayRestoresEveryFlow(t *testing.T) {
	in, mgmt := startBridge(t)
	var desired []*Flow
	for i := range 500 {
		desired = append(desired, ipFlow(uint8(i%4), 0x77, byte(i>>8), byte(i), 1))
	}
	connects := make(chan bool, 10)
	client := NewClient(mgmt, ClientOptions{
		Conn:       Options{EchoInterval: 200 * time.Millisecond},
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		OnConnect: func(ctx context.Context, c *Conn, reconnect bool) error {
			connects <- reconnect
			// An agent's replay: wipe whatever is left, then everything it wants, in one bundle.
			return c.Bundle(ctx, append([]Message{DeleteFlows(TableAll, 0, 0)}, flowMods(desired, AddFlow)...)...)
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { client.Run(ctx); close(runDone) }()
	t.Cleanup(func() { cancel(); <-runDone })

	if _, err := client.Conn(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if r := <-connects; r {
		t.Fatal("the first connection should not be reported as a reconnection")
	}
	want := flowStrings(desired)
	if got := dumpFlows(t, in); !slices.Equal(got, want) {
		t.Fatalf("after the first connection ovs-ofctl shows %d flows, want %d; first: %q vs %q", len(got), len(want), got[0], want[0])
	}
	if err := in.RestartVSwitchd(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-client.Reconnected():
	case <-time.After(30 * time.Second):
		t.Fatal("the restart was not noticed")
	}
	if r := <-connects; !r {
		t.Fatal("OnConnect should be told it is a reconnection")
	}
	if got := dumpFlows(t, in); !slices.Equal(got, want) {
		t.Fatalf("replay did not restore the flows: %d flows, want %d", len(got), len(want))
	}

	t.Run("the client API works on the new connection", func(t *testing.T) {
		extra := []*Flow{ipFlow(5, 0x78, 200, 1, 1), ipFlow(5, 0x78, 200, 2, 1)}
		if err := client.AddFlows(testCtx(t), extra...); err != nil {
			t.Fatal(err)
		}
		stats, err := client.DumpFlows(testCtx(t), TableAll, 0x78, ^uint64(0))
		if err != nil {
			t.Fatal(err)
		}
		var got []*Flow
		for i := range stats {
			got = append(got, &stats[i].Flow)
			if !stats[i].HasIdle || stats[i].IdleSec > 60 {
				t.Fatalf("Open vSwitch reports a new flow's idle time in OpenFlow 1.5, got %+v", stats[i])
			}
		}
		if !slices.Equal(flowStrings(got), flowStrings(extra)) {
			t.Fatalf("DumpFlows returned %q, want %q", flowStrings(got), flowStrings(extra))
		}
		if err := client.DeleteFlows(testCtx(t), TableAll, 0x78, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
		if got := dumpFlows(t, in); !slices.Equal(got, want) {
			t.Fatalf("delete by cookie 0x78 should leave exactly the replayed flows, got %d", len(got))
		}
	})
}

func TestPortStatusAndFlowRemovedArriveOnTheirChannels(t *testing.T) {
	in, mgmt := startBridge(t)
	c := dialForTest(t, mgmt, Options{AsyncMessages: true})
	ctx := testCtx(t)

	addVethPort(t, in, "ofc-ps", 7)
	select {
	case f := <-c.PortStatus():
		if f.Header.Type != TypePortStatus {
			t.Fatalf("got message type %d on the port status channel", f.Header.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no port status after adding a port")
	}

	f := ipFlow(0, 0x99, 9, 9, 7)
	f.Flags = FlowSendFlowRem
	if err := c.Bundle(ctx, AddFlow(f)); err != nil {
		t.Fatal(err)
	}
	if err := c.Bundle(ctx, DeleteFlows(TableAll, 0x99, ^uint64(0))); err != nil {
		t.Fatal(err)
	}
	select {
	case fr := <-c.FlowRemoved():
		if fr.Header.Type != TypeFlowRemoved {
			t.Fatalf("got message type %d on the flow removed channel", fr.Header.Type)
		}
		// ofp15_flow_removed: table_id, reason, priority, idle and hard
		// timeouts, then the cookie (OpenFlow 1.3 puts the cookie first).
		if ck := binary.BigEndian.Uint64(fr.Body[8:16]); ck != 0x99 || fr.Body[1] != 2 {
			t.Fatalf("flow removed for cookie %#x reason %d, want cookie 0x99 reason 2 (OFPRR_DELETE)", ck, fr.Body[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no flow removed after deleting a send_flow_rem flow")
	}
}
