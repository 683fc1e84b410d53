package openflow

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func groupCases() []*GroupMod {
	return []*GroupMod{
		{Command: GroupAdd, Type: GroupSelect, GroupID: 5, SelectionMethod: "hash", Fields: []Field{FieldIPv4Src, FieldTCPDst},
			Buckets: []Bucket{{Weight: 100, Actions: []Action{&Output{Port: 1}}}, {Weight: 50, Actions: []Action{Load(Reg(0).All(), 3), ResubmitToTable(4)}}}},
		{Command: GroupAdd, Type: GroupSelect, GroupID: 7, SelectionMethod: "dp_hash", SelectionMethodParam: 8,
			Buckets: []Bucket{{ID: 10, Weight: 1, Actions: []Action{&Output{Port: 2}}}, {ID: 11, Weight: 2, Actions: []Action{&Output{Port: 3}}}}},
		{Command: GroupAdd, Type: GroupAll, GroupID: 6, Buckets: []Bucket{{Actions: []Action{&Output{Port: 1}}}, {Actions: []Action{&Output{Port: 2}}}}},
		{Command: GroupAdd, Type: GroupIndirect, GroupID: 8, Buckets: []Bucket{{Actions: []Action{&SetField{Field: FieldEthDst, Value: macU128(mac("aa:00:00:00:00:01"))}, &Output{Port: 1}}}}},
		{Command: GroupAdd, Type: GroupFastFailover, GroupID: 9, Buckets: []Bucket{{WatchPort: 1, Actions: []Action{&Output{Port: 1}}}, {WatchPort: 2, Actions: []Action{&Output{Port: 2}}}}},
	}
}

var groupCommandNames = map[GroupModCommand]string{GroupAdd: "ADD", GroupModify: "MOD", GroupDelete: "DEL"}

func TestEncodedGroupModsDecodeInOvsToTheirString(t *testing.T) {
	mods := append(groupCases(), &GroupMod{Command: GroupModify, Type: GroupSelect, GroupID: 5,
		Buckets: []Bucket{{Weight: 30, Actions: []Action{&Output{Port: 4}}}}}, &GroupMod{Command: GroupDelete, Type: GroupAll, GroupID: 6})
	var msgs [][]byte
	for i, m := range mods {
		b, err := Marshal(m, Version15, uint32(i+1))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
	}
	got := ofpParse(t, msgs...)
	if len(got) != len(mods) {
		t.Fatalf("ofp-parse printed %d messages, want %d:\n%s", len(got), len(mods), strings.Join(got, "\n"))
	}
	for i, m := range mods {
		want := fmt.Sprintf("OFPT_GROUP_MOD (OF1.5) (xid=0x%x):\n %s %s", i+1, groupCommandNames[m.Command], m.String())
		if m.Command == GroupDelete {
			want = fmt.Sprintf("OFPT_GROUP_MOD (OF1.5) (xid=0x%x):\n DEL group_id=%d,type=%s", i+1, m.GroupID, m.Type)
		}
		if got[i] != want {
			t.Errorf("ofp-parse\n got: %s\nwant: %s", got[i], want)
		}
	}
}

func TestGroupModsRoundTripThroughTheDecoder(t *testing.T) {
	for _, version := range []uint8{Version15, Version13} {
		for _, m := range groupCases() {
			t.Run(fmt.Sprintf("group %d in version %d", m.GroupID, version), func(t *testing.T) {
				if version == Version13 {
					m.SelectionMethod, m.SelectionMethodParam, m.Fields = "", 0, nil
				}
				b, err := Marshal(m, version, 1)
				if err != nil {
					t.Fatal(err)
				}
				got, err := DecodeGroupMod(b[HeaderLen:], version)
				if err != nil {
					t.Fatal(err)
				}
				want := m.String()
				if version == Version13 && m.Buckets[0].ID != 0 {
					// OpenFlow 1.3 has no bucket ids: they come back numbered in order.
					want = strings.ReplaceAll(strings.ReplaceAll(want, "bucket_id:10", "bucket_id:0"), "bucket_id:11", "bucket_id:1")
				}
				if got.String() != want {
					t.Errorf("decoded\n got: %s\nwant: %s", got.String(), want)
				}
			})
		}
	}
}

// TestGroupTextRoundTripsThroughALiveSwitch adds each group with
// `ovs-ofctl add-group <String()>` and reads it back with dump-groups.
func TestGroupTextRoundTripsThroughALiveSwitch(t *testing.T) {
	in, br := encBridge(t)
	var want []string
	for _, m := range groupCases() {
		if _, err := in.Ofctl("add-group", br, m.String()); err != nil {
			t.Fatalf("add-group %s: %v", m, err)
		}
		want = append(want, m.String())
	}
	out, err := in.Ofctl("dump-groups", br)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(out, "\n")[1:] {
		got = append(got, strings.TrimSpace(line))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dump-groups differs from String():\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEncodedMeterModsDecodeInOvsToTheirString(t *testing.T) {
	mods := []*MeterMod{
		{Command: MeterAdd, Flags: MeterKbps | MeterBurst, MeterID: 1, Bands: []MeterBand{{Rate: 1000, BurstSize: 100}}},
		{Command: MeterModify, Flags: MeterPktps | MeterStats, MeterID: 2, Bands: []MeterBand{{Rate: 10}}},
		{Command: MeterDelete, MeterID: 3},
	}
	names := map[MeterModCommand]string{MeterAdd: "ADD", MeterModify: "MOD", MeterDelete: "DEL"}
	for _, version := range []uint8{Version15, Version13} {
		var msgs [][]byte
		for i, m := range mods {
			b, err := Marshal(m, version, uint32(i+1))
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, b)
			back, err := DecodeMeterMod(b[HeaderLen:])
			if err != nil || !reflect.DeepEqual(back, m) {
				t.Errorf("meter %d decodes to %+v, %v", m.MeterID, back, err)
			}
		}
		got := ofpParse(t, msgs...)
		vname := map[uint8]string{Version15: "OF1.5", Version13: "OF1.3"}[version]
		for i, m := range mods {
			want := fmt.Sprintf("OFPT_METER_MOD (%s) (xid=0x%x): %s %s", vname, i+1, names[m.Command], m)
			if i >= len(got) || strings.ReplaceAll(got[i], "\n", "") != want {
				t.Errorf("ofp-parse\n got: %q\nwant: %q", got, want)
			}
		}
	}
}
