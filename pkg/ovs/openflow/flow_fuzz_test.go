package openflow

import (
	"testing"
)

// decoders are what FuzzDecode drives; the first input byte picks one.
var decoders = []func(b []byte) (string, error){
	func(b []byte) (string, error) { return decodeAndReencodeFlowMod(b, Version15) },
	func(b []byte) (string, error) { return decodeAndReencodeFlowMod(b, Version13) },
	func(b []byte) (string, error) {
		acts, err := DecodeActions(b)
		return ActionsString(acts), err
	},
	func(b []byte) (string, error) {
		acts, err := DecodeInstructions(b)
		return ActionsString(acts), err
	},
	func(b []byte) (string, error) {
		m, _, err := DecodeMatch(b)
		return m.String(), err
	},
	func(b []byte) (string, error) {
		fs, err := DecodeFlowStats(b, Version15)
		return joinStrings(len(fs), func(i int) string { return fs[i].String() }), err
	},
	func(b []byte) (string, error) {
		fs, err := DecodeFlowStats(b, Version13)
		return joinStrings(len(fs), func(i int) string { return fs[i].String() }), err
	},
	func(b []byte) (string, error) {
		p, err := DecodePacketIn2(b)
		if err != nil {
			return "", err
		}
		return p.Match.String(), nil
	},
	func(b []byte) (string, error) {
		p, err := DecodePacketIn(b)
		if err != nil {
			return "", err
		}
		return p.Match.String(), nil
	},
	func(b []byte) (string, error) {
		g, err := DecodeGroupDesc(b, Version15)
		return joinStrings(len(g), func(i int) string { return g[i].String() }), err
	},
	func(b []byte) (string, error) {
		g, err := DecodeGroupMod(b, Version13)
		if err != nil {
			return "", err
		}
		return g.String(), nil
	},
	func(b []byte) (string, error) {
		m, err := DecodeMeterMod(b)
		if err != nil {
			return "", err
		}
		return m.String(), nil
	},
	func(b []byte) (string, error) {
		p, err := DecodePacketOut(b, Version15)
		if err != nil {
			return "", err
		}
		return ActionsString(p.Actions), nil
	},
	func(b []byte) (string, error) {
		_, err := DecodePortDesc(b, Version15)
		if err == nil {
			_, err = DecodePortStats(b, Version15)
		}
		if err == nil {
			_, err = DecodeGroupStats(b)
		}
		return "", err
	},
}

func joinStrings(n int, f func(int) string) string {
	s := ""
	for i := 0; i < n; i++ {
		s += f(i) + "\n"
	}
	return s
}

// decodeAndReencodeFlowMod checks more than "no panic": a flow mod that
// decodes and encodes again must decode to the same text.
func decodeAndReencodeFlowMod(b []byte, version uint8) (string, error) {
	fm, err := DecodeFlowMod(b, version)
	if err != nil {
		return "", err
	}
	s := fm.String()
	again, err := Marshal(fm, version, 1)
	if err != nil {
		return s, nil // decodable but not encodable (e.g. an out-of-range conjunction) is fine
	}
	fm2, err := DecodeFlowMod(again[HeaderLen:], version)
	if err != nil {
		panic("re-encoded flow mod does not decode: " + err.Error() + ": " + s)
	}
	if fm2.String() != s {
		panic("re-encoded flow mod decodes differently:\n" + s + "\n" + fm2.String())
	}
	return s, nil
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic, and
// flow mods that decode must survive a re-encode unchanged.
func FuzzDecode(f *testing.F) {
	for i, tc := range flowCases() {
		for _, version := range []uint8{Version15, Version13} {
			if b, err := Marshal(AddFlow(tc.flow), version, 1); err == nil {
				sel := byte(0)
				if version == Version13 {
					sel = 1
				}
				f.Add(append([]byte{sel}, b[HeaderLen:]...))
				f.Add(append([]byte{5 + sel}, mustFlowStats(tc.flow, version)...))
			}
		}
		if i == 0 {
			f.Add([]byte{4, 0, 1, 0, 4, 0, 0, 0, 0})
		}
	}
	for _, g := range groupCases() {
		if b, err := Marshal(g, Version13, 1); err == nil {
			f.Add(append([]byte{10}, b[HeaderLen:]...))
		}
	}
	pi := &PacketIn{Data: arpRequest(), TableID: 3, Cookie: 9, Reason: ReasonAction, UserData: []byte{1}}
	pi.Match.InPort(1).Reg(0, 1)
	if b, err := Marshal(pi, Version15, 1); err == nil {
		f.Add(append([]byte{7}, b[HeaderLen:]...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		dec := decoders[int(data[0])%len(decoders)]
		_, _ = dec(data[1:])
	})
}

func mustFlowStats(f *Flow, version uint8) []byte {
	b, err := AppendFlowStats(nil, []FlowStats{{Flow: *f, PacketCount: 3}}, version)
	if err != nil {
		return nil
	}
	return b
}

// FuzzParseFlow feeds arbitrary text to the parser: it may reject it but
// not panic, and what it accepts and can encode must print as text that
// parses back to itself.
func FuzzParseFlow(f *testing.F) {
	for _, tc := range flowCases() {
		f.Add(tc.want)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fl, err := ParseFlow(s)
		if err != nil {
			return
		}
		if _, err := Marshal(AddFlow(fl), Version15, 1); err != nil {
			return
		}
		// What prints must parse back to the same text.
		again, err := ParseFlow(fl.String())
		if err != nil {
			t.Fatalf("ParseFlow(%q) printed %q, which does not parse: %v", s, fl.String(), err)
		}
		if again.String() != fl.String() {
			t.Fatalf("ParseFlow(%q) printed %q, which parses to %q", s, fl.String(), again.String())
		}
	})
}
