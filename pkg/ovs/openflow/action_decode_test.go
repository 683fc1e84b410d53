package openflow

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// TestControllerDecodesOVSPaddedProperties decodes NXAST_CONTROLLER2 as Open
// vSwitch writes it in flow stats replies: its u16 and u8 properties carry 4
// value bytes (lib/ofp-prop.c ofpprop_put_u16/u8), 8 bytes each with the
// header. The binding writes 2 and 1 value bytes, which OVS also reads.
func TestControllerDecodesOVSPaddedProperties(t *testing.T) {
	b := appendNXHeader(nil, nxastController2)
	b = append(b, 0, 0, 0, 0, 0, 0)
	prop := func(typ uint16, v ...byte) {
		b = binary.BigEndian.AppendUint16(b, typ)
		b = binary.BigEndian.AppendUint16(b, uint16(4+len(v)))
		b = append(b, v...)
	}
	prop(0, 0, 128, 0, 0) // max_len=128
	prop(1, 0, 3, 0, 0)   // id=3
	prop(2, ReasonNoMatch, 0, 0, 0)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	acts, err := DecodeActions(b)
	if err != nil {
		t.Fatalf("decoding OVS's controller action: %v", err)
	}
	want := &Controller{MaxLen: 128, ControllerID: 3, Reason: ReasonNoMatch}
	if len(acts) != 1 || !reflect.DeepEqual(acts[0], want) {
		t.Fatalf("decoded %v, want %v", acts, want)
	}
	if got := acts[0].String(); got != "controller(reason=no_match,max_len=128,id=3)" {
		t.Errorf("prints %q", got)
	}
}
