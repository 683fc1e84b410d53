package query

import (
	"cmp"
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// LatencyRow is one cell of the latency matrix: what a source Node measured
// to one IP of a peer.
type LatencyRow struct {
	Source   string        `json:"source"`
	Peer     string        `json:"peer"`
	TargetIP string        `json:"targetIP"`
	Last     time.Duration `json:"lastRTT"`
	// Median and Max are over the agent's recentRTTNanoseconds (0 when the
	// agent sent none, as upstream's agents do not).
	Median   time.Duration `json:"medianRTT"`
	Max      time.Duration `json:"maxRTT"`
	LastSend time.Time     `json:"lastSendTime"`
	LastRecv time.Time     `json:"lastRecvTime"`
}

// Unreachable says the last probe got no reply.
func (r LatencyRow) Unreachable() bool { return r.LastRecv.IsZero() || r.LastSend.After(r.LastRecv) }

// NodeLatency returns the matrix from the NodeLatencyStats of node (every
// Node's when node is ""), and the objects read.
func NodeLatency(ctx context.Context, c *Clients, node string) ([]LatencyRow, []statsv1alpha1.NodeLatencyStats, error) {
	cl := c.Antrea.StatsV1alpha1().NodeLatencyStatses()
	var items []statsv1alpha1.NodeLatencyStats
	if node != "" {
		o, err := cl.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		items = []statsv1alpha1.NodeLatencyStats{*o}
	} else {
		l, err := cl.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		items = l.Items
	}
	return LatencyMatrix(items), items, nil
}

// LatencyMatrix flattens reports into rows, by source, peer and IP.
func LatencyMatrix(items []statsv1alpha1.NodeLatencyStats) []LatencyRow {
	var rows []LatencyRow
	for _, s := range items {
		for _, p := range s.PeerNodeLatencyStats {
			for _, t := range p.TargetIPLatencyStats {
				r := LatencyRow{Source: s.Name, Peer: p.NodeName, TargetIP: t.TargetIP,
					Last: time.Duration(t.LastMeasuredRTTNanoseconds), LastSend: t.LastSendTime.Time, LastRecv: t.LastRecvTime.Time}
				if n := len(t.RecentRTTNanoseconds); n > 0 {
					sorted := slices.Clone(t.RecentRTTNanoseconds)
					slices.Sort(sorted)
					r.Median, r.Max = time.Duration(sorted[n/2]), time.Duration(sorted[n-1])
				}
				rows = append(rows, r)
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b LatencyRow) int {
		if c := cmp.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return cmp.Compare(a.Peer, b.Peer)
	})
	return rows
}
