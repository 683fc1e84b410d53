package openflow

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestFlowStatsFromALiveSwitchDecodeToWhatDumpFlowsPrints installs every flow
// of the table, reads them back through a flow stats request in each
// version, and checks that each decoded flow prints as dump-flows does.
func TestFlowStatsFromALiveSwitchDecodeToWhatDumpFlowsPrints(t *testing.T) {
	in, br := encBridge(t)
	for _, cmd := range [][]string{{"add-group", "group_id=1,type=all,bucket=output:1"}, {"add-meter", "meter=1,kbps,band=type=drop,rate=1000"}} {
		if _, err := in.Ofctl(cmd[0], br, cmd[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range flowCases() {
		if tc.noLive {
			continue
		}
		if _, err := in.Ofctl("add-flow", br, tc.flow.String()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	want := encDumpFlows(t, in, br)
	sort.Strings(want)
	for _, version := range []uint8{Version15, Version13} {
		t.Run(fmt.Sprintf("version %d", version), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := Dial(ctx, in.BridgeMgmt(br), Options{Versions: []uint8{version}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			body, err := c.FlowStatsRaw(ctx, FlowStatsRequest{TableID: TableAll})
			if err != nil {
				t.Fatal(err)
			}
			stats, err := DecodeFlowStats(body, version)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range stats {
				s := stats[i].Flow.String()
				if version < Version15 {
					// OpenFlow 1.3 reports neither importance nor meters as actions.
					s = strings.Replace(s, "importance=3, ", "", 1)
				}
				got = append(got, s)
			}
			sort.Strings(got)
			w := want
			if version < Version15 {
				w = nil
				for _, s := range want {
					w = append(w, strings.Replace(s, "importance=3, ", "", 1))
				}
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("decoded flow stats differ from dump-flows:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
		})
	}
}

func TestFlowStatsRoundTripWithCounters(t *testing.T) {
	var entries []FlowStats
	for i, tc := range flowCases() {
		entries = append(entries, FlowStats{Flow: *tc.flow, DurationSec: uint32(i), DurationNsec: 5, PacketCount: uint64(i * 10), ByteCount: uint64(i * 1000)})
	}
	for _, version := range []uint8{Version15, Version13} {
		var in []FlowStats
		for _, e := range entries {
			if version < Version15 && (e.Importance != 0 || hasMeter(e.Actions)) {
				continue
			}
			in = append(in, e)
		}
		b, err := AppendFlowStats(nil, in, version)
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecodeFlowStats(b, version)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) {
			t.Fatalf("decoded %d entries, want %d", len(out), len(in))
		}
		for i := range in {
			if out[i].String() != in[i].String() || out[i].PacketCount != in[i].PacketCount || out[i].ByteCount != in[i].ByteCount ||
				out[i].DurationSec != in[i].DurationSec || out[i].DurationNsec != in[i].DurationNsec {
				t.Errorf("version %d entry %d: got %s %+v", version, i, out[i].String(), out[i])
			}
		}
	}
}

// TestTablePortAndGroupStatsFromALiveSwitchDecode reads table stats, port
// desc, port stats, group desc and group stats of a live bridge.
func TestTablePortAndGroupStatsFromALiveSwitchDecode(t *testing.T) {
	in, br := encBridge(t)
	if _, err := in.Vsctl("add-port", br, "p1", "--", "set", "interface", "p1", "type=internal", "ofport_request=5"); err != nil {
		t.Fatal(err)
	}
	for _, m := range groupCases() {
		if _, err := in.Ofctl("add-group", br, m.String()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Ofctl("add-flow", br, "table=0,priority=1,actions=drop"); err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint8{Version15, Version13} {
		t.Run(fmt.Sprintf("version %d", version), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := Dial(ctx, in.BridgeMgmt(br), Options{Versions: []uint8{version}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			body, err := c.TableStatsRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tables, err := DecodeTableStats(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) < 254 || tables[0].TableID != 0 || tables[0].ActiveCount != 1 || tables[1].ActiveCount != 0 {
				t.Errorf("table stats: %d tables, first %+v", len(tables), tables[:min(2, len(tables))])
			}

			body, err = c.PortDescRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ports, err := DecodePortDesc(body, version)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]uint32{}
			for _, p := range ports {
				names[p.Name] = p.PortNo
				if len(p.HWAddr) != 6 {
					t.Errorf("port %s has MAC %v", p.Name, p.HWAddr)
				}
			}
			if names["p1"] != 5 || names[br] != PortLocal {
				t.Errorf("port desc names %v, want p1=5 and %s=LOCAL", names, br)
			}

			body, err = c.PortStatsRaw(ctx, PortAny)
			if err != nil {
				t.Fatal(err)
			}
			pstats, err := DecodePortStats(body, version)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[uint32]bool{}
			for _, p := range pstats {
				seen[p.PortNo] = true
			}
			if !seen[5] || !seen[PortLocal] || len(pstats) != len(ports) {
				t.Errorf("port stats cover %v, want the %d ports", seen, len(ports))
			}

			body, err = c.GroupDescRaw(ctx, GroupIDAll)
			if err != nil {
				t.Fatal(err)
			}
			groups, err := DecodeGroupDesc(body, version)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for i := range groups {
				got = append(got, groups[i].String())
			}
			for _, m := range groupCases() {
				if version < Version15 {
					// OpenFlow 1.3 carries no selection method and no bucket ids.
					m.SelectionMethod, m.SelectionMethodParam, m.Fields = "", 0, nil
					for i := range m.Buckets {
						m.Buckets[i].ID = 0
					}
				}
				want = append(want, m.String())
			}
			sort.Strings(got)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("group desc:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			body, err = c.GroupStatsRaw(ctx, GroupIDAll)
			if err != nil {
				t.Fatal(err)
			}
			gstats, err := DecodeGroupStats(body)
			if err != nil {
				t.Fatal(err)
			}
			buckets := map[uint32]int{}
			for _, g := range gstats {
				buckets[g.GroupID] = len(g.Buckets)
			}
			if !reflect.DeepEqual(buckets, map[uint32]int{5: 2, 6: 2, 7: 2, 8: 1, 9: 2}) {
				t.Errorf("group stats buckets per group: %v", buckets)
			}
		})
	}
}
