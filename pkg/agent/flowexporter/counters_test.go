package flowexporter

import (
	"net/netip"
	"testing"

	"antrea.io/antrea/pkg/ipfix"
)

// ovsLikeTemplate has the fields the feed reads from ovs-vswitchd's
// bridge IPFIX records (OVS sends many more; their order is OVS's).
var ovsLikeTemplate = ipfix.Template{ID: 280, Fields: []ipfix.Element{ipfix.FlowDirection, ipfix.ProtocolIdentifier,
	ipfix.SourceIPv4Address, ipfix.DestinationIPv4Address, ipfix.SourceTransportPort, ipfix.DestinationTransportPort,
	ipfix.PacketDeltaCount, ipfix.OctetDeltaCount}}

func ovsRecord(dir uint64, sport uint16, pkts, bytes uint64) []ipfix.Value {
	return []ipfix.Value{ipfix.U(dir), ipfix.U(6), ipfix.A(netip.MustParseAddr("10.10.1.2")),
		ipfix.A(netip.MustParseAddr("10.10.1.3")), ipfix.U(uint64(sport)), ipfix.U(80), ipfix.U(pkts), ipfix.U(bytes)}
}

func TestTheFeedSumsInputRecordsPerDirectionAndForgetsEndedOnes(t *testing.T) {
	f := &OVSIPFIXFeed{max: 2, counts: map[Tuple]*feedEntry{}}
	s := ipfix.NewSession()
	w := &ipfix.Writer{}
	ingest := func(b []byte) error { return f.Ingest(s, b) }
	if err := w.Templates(1, ingest, ovsLikeTemplate); err != nil {
		t.Fatal(err)
	}
	recs := [][]ipfix.Value{
		ovsRecord(0, 1000, 10, 1500), ovsRecord(1, 1000, 10, 1500), // the same packets at input and output
		ovsRecord(0, 1000, 5, 500),
		ovsRecord(0, 2000, 1, 60),
		ovsRecord(0, 3000, 1, 60), // a third direction: beyond max
	}
	if err := w.Data(2, ovsLikeTemplate, recs, ingest); err != nil {
		t.Fatal(err)
	}
	t1000 := conn(1000, Counts{}, Counts{}).Orig
	t2000 := conn(2000, Counts{}, Counts{}).Orig
	if c, ok := f.Counts(t1000); !ok || c != (Counts{15, 2000}) {
		t.Errorf("counts %+v (%v), want the input records summed: 15 packets, 2000 bytes", c, ok)
	}
	if f.Dropped.Load() != 1 || f.Records.Load() != 3 {
		t.Errorf("dropped %d records %d, want 1 and 3 (the output record is not summed)", f.Dropped.Load(), f.Records.Load())
	}
	// A direction no connection holds any more survives one Retain (its
	// records may have come first), not two.
	f.Retain(map[Tuple]struct{}{t1000: {}})
	if _, ok := f.Counts(t2000); !ok {
		t.Error("forgotten right after its records came")
	}
	f.Retain(map[Tuple]struct{}{t1000: {}})
	if _, ok := f.Counts(t2000); ok {
		t.Error("kept after two polls without its connection")
	}
	if _, ok := f.Counts(t1000); !ok {
		t.Error("a live connection's counts were forgotten")
	}
}
