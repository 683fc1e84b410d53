package ipfix

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

var testTemplate = Template{ID: 256, Fields: []Element{
	SourceIPv4Address, DestinationIPv4Address, SourceTransportPort, DestinationTransportPort, ProtocolIdentifier,
	PacketTotalCount, OctetTotalCount, ReverseOctetTotalCount, SourcePodName, TCPState, FlowType,
}}

func testRecord(pod string) []Value {
	return []Value{A(netip.MustParseAddr("10.10.1.2")), A(netip.MustParseAddr("10.10.1.3")), U(40000), U(8080), U(6),
		U(12), U(3456), U(1 << 40), S(pod), S("ESTABLISHED"), U(uint64(FlowTypeIntraNode))}
}

// collect returns an emit function that keeps copies of the messages.
func collect(msgs *[][]byte) func([]byte) error {
	return func(b []byte) error {
		*msgs = append(*msgs, append([]byte(nil), b...))
		return nil
	}
}

func TestDecodeReadsWhatTheWriterWrote(t *testing.T) {
	w := &Writer{Domain: 7}
	var msgs [][]byte
	if err := w.Templates(1000, collect(&msgs), testTemplate); err != nil {
		t.Fatal(err)
	}
	if err := w.Data(1001, testTemplate, [][]Value{testRecord("a"), testRecord(strings.Repeat("p", 300))}, collect(&msgs)); err != nil {
		t.Fatal(err)
	}
	s := NewSession()
	var recs []Record
	for _, b := range msgs {
		m, err := s.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Domain != 7 {
			t.Errorf("domain %d, want 7", m.Domain)
		}
		recs = append(recs, m.Records...)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, pod := range []string{"a", strings.Repeat("p", 300)} {
		want := testRecord(pod)
		for j, e := range testTemplate.Fields {
			got, ok := recs[i].Get(e)
			if !ok {
				t.Fatalf("record %d has no %s", i, e)
			}
			if got.Uint != want[j].Uint || got.Str != want[j].Str || got.Addr != want[j].Addr {
				t.Errorf("record %d %s = %+v, want %+v", i, e, got, want[j])
			}
			if recs[i].Fields[j].Name != e.Name {
				t.Errorf("record %d field %d decoded as %q, want %q", i, j, recs[i].Fields[j].Name, e.Name)
			}
		}
	}
}

// The bytes below are laid out by hand from RFC 7011's figures (sections
// 3.1, 3.3.2, 3.4.1, 7), not by the Writer.
func TestDecodeReadsAHandBuiltMessage(t *testing.T) {
	var b []byte
	be16 := func(v uint16) { b = binary.BigEndian.AppendUint16(b, v) }
	be32 := func(v uint32) { b = binary.BigEndian.AppendUint32(b, v) }
	be16(10)
	be16(0) // length, below
	be32(1700000000)
	be32(5)
	be32(9)
	// Template set: template 300 with protocolIdentifier (4, 1 byte),
	// sourcePodName (enterprise bit | 101, variable, PEN 56506).
	be16(2)
	be16(4 + 4 + 4 + 8)
	be16(300)
	be16(2)
	be16(4)
	be16(1)
	be16(0x8000 | 101)
	be16(0xffff)
	be32(56506)
	// Data set 300: one record (17, "web-0"), then a byte of padding
	// (shorter than the shortest record, 2 bytes, as section 3.3.1 wants).
	be16(300)
	be16(4 + 1 + 6 + 1)
	b = append(b, 17, 5, 'w', 'e', 'b', '-', '0', 0)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))

	m, err := NewSession().Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sequence != 5 || m.ExportTime != 1700000000 || len(m.Templates) != 1 || len(m.Records) != 1 {
		t.Fatalf("decoded %+v", m)
	}
	if v, _ := m.Records[0].Get(ProtocolIdentifier); v.Uint != 17 {
		t.Errorf("protocolIdentifier %d, want 17", v.Uint)
	}
	if v, _ := m.Records[0].Get(SourcePodName); v.Str != "web-0" {
		t.Errorf("sourcePodName %q, want web-0", v.Str)
	}
	if m.Records[0].Fields[1].Name != "sourcePodName" {
		t.Errorf("field decoded as %q, want Antrea's sourcePodName", m.Records[0].Fields[1].Name)
	}
}

func TestVariableLengthUsesThreeBytesFrom255(t *testing.T) {
	e := SourcePodName
	for _, n := range []int{0, 254, 255, 1000} {
		b, err := appendValue(nil, e, S(strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		prefix := 1
		if n >= 255 {
			prefix = 3
			if b[0] != 255 || int(binary.BigEndian.Uint16(b[1:])) != n {
				t.Errorf("%d bytes: prefix % x", n, b[:3])
			}
		} else if int(b[0]) != n {
			t.Errorf("%d bytes: length byte %d", n, b[0])
		}
		if len(b) != prefix+n {
			t.Errorf("%d bytes encoded in %d, want %d", n, len(b), prefix+n)
		}
	}
}

func TestDataSplitsMessagesAtMaxLenAndNumbersRecords(t *testing.T) {
	w := &Writer{MaxLen: 200}
	recs := make([][]Value, 10)
	for i := range recs {
		recs[i] = testRecord("pod")
	}
	var msgs [][]byte
	if err := w.Data(1, testTemplate, recs, collect(&msgs)); err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 2 {
		t.Fatalf("%d messages, want the 10 records split", len(msgs))
	}
	s := NewSession()
	var ts [][]byte
	if err := (&Writer{}).Templates(1, collect(&ts), testTemplate); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(ts[0]); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range msgs {
		if len(b) > 200 {
			t.Errorf("message of %d bytes, more than MaxLen", len(b))
		}
		m, err := s.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if int(m.Sequence) != total {
			t.Errorf("sequence %d, want the %d records sent before", m.Sequence, total)
		}
		total += len(m.Records)
	}
	if total != 10 || w.Sequence() != 10 {
		t.Errorf("%d records decoded, writer's sequence %d, want 10 and 10", total, w.Sequence())
	}
}

func TestARecordLargerThanAMessageIsRefused(t *testing.T) {
	w := &Writer{MaxLen: 100}
	err := w.Data(1, testTemplate, [][]Value{testRecord(strings.Repeat("p", 200))}, func([]byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Fatalf("err %v, want a record that does not fit", err)
	}
}

func TestValuesThatDoNotFitTheirElementAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		e Element
		v Value
	}{
		"a port above 65535":          {SourceTransportPort, U(70000)},
		"an IPv6 address as IPv4":     {SourceIPv4Address, A(netip.MustParseAddr("fd00::1"))},
		"no address":                  {DestinationIPv6Address, Value{}},
		"a protocol number above 255": {ProtocolIdentifier, U(256)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := appendValue(nil, tc.e, tc.v); err == nil {
				t.Fatal("encoded, want an error")
			}
		})
	}
}

func TestDataOfAnUnknownTemplateIsCountedAndWithdrawalForgetsIt(t *testing.T) {
	w := &Writer{}
	var msgs [][]byte
	if err := w.Data(1, testTemplate, [][]Value{testRecord("a")}, collect(&msgs)); err != nil {
		t.Fatal(err)
	}
	s := NewSession()
	m, err := s.Decode(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.UnknownSets != 1 || len(m.Records) != 0 {
		t.Fatalf("unknown sets %d records %d, want 1 and 0", m.UnknownSets, len(m.Records))
	}
	var ts [][]byte
	if err := w.Templates(1, collect(&ts), testTemplate); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(ts[0]); err != nil {
		t.Fatal(err)
	}
	if m, _ = s.Decode(msgs[0]); len(m.Records) != 1 {
		t.Fatalf("%d records once the template is known, want 1", len(m.Records))
	}
	// Withdrawal: template set holding (256, 0).
	wd := []byte{0, 10, 0, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 8, 1, 0, 0, 0}
	if _, err := s.Decode(wd); err != nil {
		t.Fatal(err)
	}
	if m, _ = s.Decode(msgs[0]); m.UnknownSets != 1 {
		t.Fatalf("the withdrawn template still decodes: %+v", m)
	}
}

func TestReadMessageFramesAStream(t *testing.T) {
	w := &Writer{}
	var stream bytes.Buffer
	emit := func(b []byte) error { stream.Write(b); return nil }
	if err := w.Templates(1, emit, testTemplate); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Data(2, testTemplate, [][]Value{testRecord("a"), testRecord("b")}, emit); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSession()
	var buf []byte
	recs := 0
	for i := 0; i < 4; i++ {
		b, err := ReadMessage(&stream, buf)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		recs += len(m.Records)
		buf = b
	}
	if recs != 6 || stream.Len() != 0 {
		t.Fatalf("%d records and %d bytes left, want 6 and 0", recs, stream.Len())
	}
}

func TestMalformedMessagesAreErrors(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":             {0, 10, 0},
		"wrong version":     {0, 9, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"length past end":   {0, 10, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"set past end":      {0, 10, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 9},
		"reserved set":      {0, 10, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 4},
		"zero-length field": {0, 10, 0, 28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 12, 1, 0, 0, 1, 0, 1, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewSession().Decode(b); err == nil {
				t.Fatal("decoded, want an error")
			}
		})
	}
}

func FuzzDecodeMessage(f *testing.F) {
	w := &Writer{}
	var msgs [][]byte
	_ = w.Templates(1, collect(&msgs), testTemplate)
	_ = w.Data(1, testTemplate, [][]Value{testRecord("a"), testRecord(strings.Repeat("x", 300))}, collect(&msgs))
	f.Add(msgs[0])
	f.Add(append(append([]byte(nil), msgs[0]...), msgs[1]...))
	f.Add(msgs[1])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewSession()
		// The template message first, then the input: data sets of the
		// known template are decoded too, not only skipped.
		_, _ = s.Decode(msgs[0])
		m, err := s.Decode(b)
		if err == nil && m == nil {
			t.Fatal("no message and no error")
		}
		_, _ = ReadMessage(bytes.NewReader(b), nil)
	})
}
