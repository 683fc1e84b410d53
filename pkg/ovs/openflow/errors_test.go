package openflow

import (
	"errors"
	"strings"
	"testing"
)

func TestErrorsAreNamedAsTheSpecNamesThem(t *testing.T) {
	tests := []struct {
		name string
		err  Error
		want string
	}{
		{"a bad output port", Error{Type: 2, Code: 4}, "OFPBAC_BAD_OUT_PORT"},
		{"a bad goto_table", Error{Type: 3, Code: 2}, "OFPBIC_BAD_TABLE_ID"},
		{"an overlapping flow", Error{Type: 5, Code: 3}, "OFPFMFC_OVERLAP"},
		{"a failed bundle message", Error{Type: 17, Code: 13}, "OFPBFC_MSG_FAILED"},
		{"an unknown group", Error{Type: 6, Code: 8}, "OFPGMFC_UNKNOWN_GROUP"},
		{"a Nicira conjunction error", Error{Type: 0xffff, Code: 15, Experimenter: NiciraExperimenter}, "NXBAC_BAD_CONJUNCTION"},
		{"an ONF bundle error of OpenFlow 1.3", Error{Type: 0xffff, Code: 2313, Experimenter: ONFExperimenter}, "OFPBFC_MSG_FAILED"},
		{"an unknown code of a known type", Error{Type: 2, Code: 99}, "OFPET_BAD_ACTION(code=99)"},
		{"an unknown type", Error{Type: 99, Code: 1}, "OFPET(type=99,code=1)"},
		{"an unknown experimenter", Error{Type: 0xffff, Code: 1, Experimenter: 42}, "OFPET_EXPERIMENTER(experimenter=0x2a,code=1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Name(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorsDecodeAndNameTheFailedRequest(t *testing.T) {
	req, _ := Marshal(&RawMessage{Type: 14, Body: []byte{1, 2, 3}}, Version15, 9)
	for _, in := range []*Error{
		{Xid: 9, Type: 2, Code: 4, Data: req},
		{Xid: 9, Type: 0xffff, Code: 15, Experimenter: NiciraExperimenter, Data: req},
	} {
		got, err := DecodeError(9, AppendErrorBody(nil, in))
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != in.Type || got.Code != in.Code || got.Experimenter != in.Experimenter || string(got.Data) != string(req) {
			t.Fatalf("round trip changed the error: %+v -> %+v", in, got)
		}
		if h, ok := got.FailedHeader(); !ok || h.Xid != 9 || h.Type != 14 {
			t.Fatalf("failed request header not decoded: %+v", h)
		}
		got.Request = "table=0 actions=output:7"
		if msg := got.Error(); !strings.Contains(msg, "table=0 actions=output:7") || !strings.Contains(msg, got.Name()) {
			t.Fatalf("error text should name the request and the error: %s", msg)
		}
		if !errors.Is(got, &Error{Type: in.Type, Code: in.Code, Experimenter: in.Experimenter}) {
			t.Fatal("errors.Is should match type, code and experimenter")
		}
	}
	if _, err := DecodeError(1, []byte{0xff, 0xff, 0, 1}); err == nil {
		t.Fatal("a truncated experimenter error should not decode")
	}
}
