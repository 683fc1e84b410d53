package antctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

func TestNodeLatencyTablePrintsTheMatrixWithMedianMaxAndUnreachablePeers(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	items := []statsv1alpha1.NodeLatencyStats{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, PeerNodeLatencyStats: []statsv1alpha1.PeerNodeLatencyStats{{NodeName: "a",
			TargetIPLatencyStats: []statsv1alpha1.TargetIPLatencyStats{{TargetIP: "10.0.0.1", LastSendTime: at(time.Second),
				LastRecvTime: at(31 * time.Second), LastMeasuredRTTNanoseconds: ms(0.2)}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, PeerNodeLatencyStats: []statsv1alpha1.PeerNodeLatencyStats{{NodeName: "b",
			TargetIPLatencyStats: []statsv1alpha1.TargetIPLatencyStats{{TargetIP: "10.0.1.1", LastSendTime: at(2 * time.Second),
				LastRecvTime: at(2 * time.Second), LastMeasuredRTTNanoseconds: ms(0.3),
				RecentRTTNanoseconds: []int64{ms(0.5), ms(0.1), ms(0.3), ms(2), ms(0.2)}}}}}},
	}
	var out bytes.Buffer
	if err := writeLatencyTable(&out, query.LatencyMatrix(items), now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s\nwant a header and two rows", out.String())
	}
	for i, want := range [][]string{
		{"a", "b", "10.0.1.1", "0.300ms", "0.300ms", "2.000ms", "2s ago"}, // median of 0.1 0.2 0.3 0.5 2
		{"b", "a", "10.0.0.1", "UNREACHABLE", "-", "-", "31s ago"},        // sent after its last reply; an upstream agent: no window
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d = %q, want %q", i, got, want)
		}
	}
}
