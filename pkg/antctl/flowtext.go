package antctl

import (
	"fmt"
	"strings"

	"antrea.io/antrea/pkg/ovs/openflow"
)

// flowStatsText prints a flow with its counters as `ovs-ofctl -O OpenFlow15
// dump-flows` prints it (lib/ofp-flow.c ofputil_flow_stats_format): cookie,
// duration, table, n_packets, n_bytes, then the timeouts, flags and
// importance, idle_age, then the match and actions. Everything after the
// counters comes from the binding's own Flow.String (the --no-stats form), so
// only the counters are printed here.
func flowStatsText(fs *openflow.FlowStats) string {
	noStats := fs.Flow
	noStats.Cookie, noStats.Table = 0, 0
	full := noStats.String()
	tail := noStats
	tail.IdleTimeout, tail.HardTimeout, tail.Flags, tail.Importance = 0, 0, 0, 0
	matchActions := tail.String()
	head := strings.TrimSuffix(full, matchActions) // "idle_timeout=…, " … "importance=…, "
	var b strings.Builder
	fmt.Fprintf(&b, "cookie=%#x, duration=%s, table=%d, n_packets=%d, n_bytes=%d, %s",
		fs.Cookie, durationText(fs.DurationSec, fs.DurationNsec), fs.Table, fs.PacketCount, fs.ByteCount, head)
	if fs.HasIdle {
		fmt.Fprintf(&b, "idle_age=%d, ", fs.IdleSec)
	}
	b.WriteString(matchActions)
	return b.String()
}

// durationText is ofp_print_duration: whole seconds alone, milliseconds as
// three decimals, finer values with the decimals they need.
func durationText(sec, nsec uint32) string {
	s := fmt.Sprint(sec)
	switch {
	case nsec == 0:
	case nsec%1000000 == 0:
		s += fmt.Sprintf(".%03d", nsec/1000000)
	default:
		s += strings.TrimRight(fmt.Sprintf(".%09d", nsec), "0")
	}
	return s + "s"
}
