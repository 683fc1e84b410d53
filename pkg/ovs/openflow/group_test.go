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

func bigSelectGroup(n int) *GroupMod {
	g := &GroupMod{Command: GroupAdd, Type: GroupSelect, GroupID: 3}
	for i := 0; i < n; i++ {
		g.Buckets = append(g.Buckets, Bucket{Weight: 100, Actions: []Action{Load(Reg(3).All(), uint64(0x0a000000+i)), Load(Reg(4).Range(0, 15), 80), ResubmitToTable(8)}})
	}
	return g
}

func TestInsertBucketModsDecodeInOvs(t *testing.T) {
	mods := []*GroupMod{
		{Command: GroupInsertBucket, Type: GroupSelect, GroupID: 9, Buckets: []Bucket{{ID: 5, Weight: 100, Actions: []Action{&Output{Port: 1}}}}},
		{Command: GroupInsertBucket, Type: GroupSelect, GroupID: 9, CommandBucketID: BucketFirst, Buckets: []Bucket{{ID: 6, Weight: 100, Actions: []Action{&Output{Port: 2}}}}},
	}
	var msgs [][]byte
	for i, m := range mods {
		b, err := Marshal(m, Version15, uint32(i+1))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, b)
		back, err := DecodeGroupMod(b[HeaderLen:], Version15)
		if err != nil || back.String() != m.String() || back.CommandBucketID != m.CommandBucketID || back.Command != m.Command {
			t.Errorf("group mod %d decodes to %+v, %v", i, back, err)
		}
	}
	got := ofpParse(t, msgs...)
	want := []string{
		"OFPT_GROUP_MOD (OF1.5) (xid=0x1):\n INSERT_BUCKET command_bucket_id:last,group_id=9,bucket=bucket_id:5,weight:100,actions=output:1",
		"OFPT_GROUP_MOD (OF1.5) (xid=0x2):\n INSERT_BUCKET command_bucket_id:first,group_id=9,bucket=bucket_id:6,weight:100,actions=output:2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ofp-parse\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := Marshal(mods[0], Version13, 1); err == nil {
		t.Error("insert bucket should need OpenFlow 1.5")
	}
}

func TestSplitKeepsEveryBucketInOrderWithinTheMessageSize(t *testing.T) {
	g := bigSelectGroup(2000)
	parts, err := g.Split(MaxGroupModLen)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 2 || parts[0].Command != GroupAdd {
		t.Fatalf("2000 buckets of 64 bytes (128 KB) should need at least 2 messages, the first the add; got %d", len(parts))
	}
	var ids []uint32
	for i, p := range parts {
		b, err := Marshal(p, Version15, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxGroupModLen {
			t.Fatalf("message %d has %d bytes, above %d", i, len(b), MaxGroupModLen)
		}
		if i > 0 && (p.Command != GroupInsertBucket || p.CommandBucketID != BucketLast) {
			t.Fatalf("message %d should insert its buckets last, is %v %x", i, p.Command, p.CommandBucketID)
		}
		for _, bk := range p.Buckets {
			ids = append(ids, bk.ID)
		}
	}
	for i, id := range ids {
		if id != uint32(i) {
			t.Fatalf("bucket %d has id %d: ids should be 0..1999 in order", i, id)
		}
	}
	if len(ids) != 2000 {
		t.Fatalf("split holds %d buckets, want 2000", len(ids))
	}
	small := bigSelectGroup(10)
	if parts, _ := small.Split(MaxGroupModLen); len(parts) != 1 || parts[0] != small {
		t.Fatal("a group that fits should be returned as it is")
	}
}
