package openflow

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// arpRequest is a broadcast ARP request frame of 60 bytes.
func arpRequest() []byte {
	p := make([]byte, 60)
	copy(p, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xaa, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1})
	return p
}

func TestEncodedPacketOutsDecodeInOvs(t *testing.T) {
	withReg := &PacketOut{InPort: 3, Actions: []Action{&Output{Port: 2}}, Data: arpRequest()}
	withReg.Match.Reg(1, 5)
	cases := []struct {
		version uint8
		po      *PacketOut
		want    string
	}{
		{Version15, withReg, "OFPT_PACKET_OUT (OF1.5) (xid=0x1): reg1=0x5,in_port=3 actions=output:2 data_len=60"},
		{Version15, &PacketOut{Actions: []Action{&Output{Port: PortTable}}, Data: arpRequest()}, "OFPT_PACKET_OUT (OF1.5) (xid=0x1): in_port=CONTROLLER actions=TABLE data_len=60"},
		{Version13, &PacketOut{InPort: PortLocal, Actions: []Action{Load(Reg(0).All(), 1), ResubmitToTable(2)}, Data: arpRequest()},
			"OFPT_PACKET_OUT (OF1.3) (xid=0x1): in_port=LOCAL actions=set_field:0x1->reg0,resubmit(,2) data_len=60"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			b, err := Marshal(tc.po, tc.version, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := ofpParse(t, b)
			if len(got) != 1 || strings.SplitN(got[0], "\n", 2)[0] != tc.want {
				t.Errorf("ofp-parse printed %q, want first line %q", got, tc.want)
			}
			back, err := DecodePacketOut(b[HeaderLen:], tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if back.InPort != tc.po.InPort || !bytes.Equal(back.Data, tc.po.Data) || ActionsString(back.Actions) != ActionsString(tc.po.Actions) || !back.Match.Equal(&tc.po.Match) {
				t.Errorf("decoded %+v, want %+v", back, tc.po)
			}
		})
	}
}

func TestEncodedPacketInsDecodeInOvsAndRoundTrip(t *testing.T) {
	pi := &PacketIn{Data: arpRequest(), TableID: 3, Cookie: 9, Reason: ReasonAction, UserData: []byte{1, 2},
		// A continuation is opaque to controllers; this one holds a bridge UUID property.
		Continuation: []byte{0, 0, 0, 0, 0x80, 0, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0}}
	pi.Match.InPort(3).Reg(0, 7)
	b, err := Marshal(pi, Version15, 1)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Marshal(pi.Resume(), Version15, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := ofpParse(t, b, rb)
	want := []string{
		"NXT_PACKET_IN2 (OF1.5) (xid=0x1): table_id=3 cookie=0x9 total_len=60 reg0=0x7,in_port=3 (via action) data_len=60 (unbuffered)\n userdata=01.02\n continuation.bridge=04030201-0807-0605-0c0b-0a09100f0e0d",
		"NXT_RESUME (OF1.5) (xid=0x2): table_id=3 cookie=0x9 total_len=60 reg0=0x7,in_port=3 (via action) data_len=60 (unbuffered)\n continuation.bridge=04030201-0807-0605-0c0b-0a09100f0e0d",
	}
	for i := range want {
		if i >= len(got) || !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("ofp-parse printed\n%q\nwant prefix\n%q", got, want[i])
		}
	}
	back, err := DecodePacketIn2(b[HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	pi.FullLen, pi.BufferID = 60, 0xffffffff
	if !reflect.DeepEqual(back, pi) {
		t.Errorf("decoded\n%+v\nwant\n%+v", back, pi)
	}
}

// TestControllerActionYieldsAPacketInWithItsUserdata sends a packet through a
// live bridge whose flows have controller(userdata=...[,pause]), decodes the
// NXT_PACKET_IN2s the switch sends and resumes the paused one.
func TestControllerActionYieldsAPacketInWithItsUserdata(t *testing.T) {
	in, br := encBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, in.BridgeMgmt(br), Options{AsyncMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Table 3 sends the packet to the controller, table 4 also pauses it.
	f := &Flow{Table: 3, Priority: 10, Cookie: 0x77,
		Actions: []Action{Load(Reg(2).All(), 0x1234), SendToController([]byte{0xab, 0xcd}, false), ResubmitToTable(4)}}
	f.Match.EthType(EthTypeARP)
	paused := &Flow{Table: 4, Priority: 10, Actions: []Action{SendToController([]byte{0xef}, true), SendToController([]byte{0x01}, false)}}
	for _, fl := range []*Flow{f, paused} {
		if _, err := in.Ofctl("add-flow", br, fl.String()); err != nil {
			t.Fatal(err)
		}
	}
	pkt := fmt.Sprintf("%x", arpRequest())
	if _, err := in.Ofctl("packet-out", br, "in_port=LOCAL packet="+pkt+" actions=resubmit(,3)"); err != nil {
		t.Fatal(err)
	}
	next := func() *PacketIn {
		t.Helper()
		select {
		case fr := <-c.PacketIns():
			if !IsPacketIn2(fr) {
				t.Fatalf("got packet-in of type %d, want NXT_PACKET_IN2", fr.Header.Type)
			}
			p, err := DecodePacketIn2(fr.Body)
			if err != nil {
				t.Fatal(err)
			}
			return p
		case <-ctx.Done():
			t.Fatal("no packet-in arrived")
		}
		return nil
	}
	p := next()
	if !bytes.Equal(p.UserData, []byte{0xab, 0xcd}) || p.TableID != 3 || p.Cookie != 0x77 || p.Reason != ReasonAction || !bytes.Equal(p.Data, arpRequest()) {
		t.Errorf("packet-in %+v", p)
	}
	if in, ok := p.Match.Get(FieldInPort); !ok || uint32(in.Value.Lo) != PortLocal {
		t.Errorf("packet-in metadata %s lacks in_port=LOCAL", p.Match.String())
	}
	if r, ok := p.Match.Get(Reg(2)); !ok || r.Value.Lo != 0x1234 {
		t.Errorf("packet-in metadata %s lacks reg2=0x1234", p.Match.String())
	}
	if len(p.Continuation) != 0 {
		t.Errorf("a packet-in that did not pause has a continuation")
	}
	p = next()
	if !bytes.Equal(p.UserData, []byte{0xef}) || len(p.Continuation) == 0 {
		t.Fatalf("paused packet-in has userdata %x and a continuation of %d bytes, want ef and some", p.UserData, len(p.Continuation))
	}
	// Resuming runs the rest of the paused flow's actions: the second controller action.
	if err := c.Send(ctx, p.Resume()); err != nil {
		t.Fatal(err)
	}
	if p = next(); !bytes.Equal(p.UserData, []byte{0x01}) {
		t.Errorf("after resume got packet-in with userdata %x, want 01", p.UserData)
	}
}
