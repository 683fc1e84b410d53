package scale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one size's figures (one JSON line of the results file).
type Result struct {
	Nodes, Pods, K8sPolicies, ACNPs int
	// Controller: CPU seconds from its start to the end of the run, RSS at
	// the end and peak (VmHWM).
	ControllerCPUSeconds, ControllerRSSMiB, ControllerPeakMiB float64
	APIServerRSSMiB, EtcdRSSMiB                               float64
	// Per simulated agent, over every agent: messages (listed objects and
	// events), bytes of those objects in JSON, bytes read from its
	// connection (TLS included); median and max.
	MsgsMedian, MsgsMax       int
	KiBMedian, KiBMax         float64
	WireKiBMedian, WireKiBMax float64
	InitialSyncSeconds        float64
	// Latencies in ms from the change to the last affected agent having it
	// (p50/p99 over the changes), per kind of change.
	Latency map[string]Percentiles
	// RestartSyncSeconds: controller restarted -> every agent's watches
	// open again and every agent holding its span.
	RestartSyncSeconds float64
	// Churn (SCALE_CHURN_SECONDS): pod operations per second achieved
	// (creates, deletes and relabels, plus one ACNP change a second and
	// a Node joining and leaving), the controller's CPU seconds per
	// second of churn, and the seconds from the churn's end to every
	// agent holding its span.
	ChurnOpsPerSecond, ChurnCPUPerSecond, ChurnSettleSeconds float64
	Mismatches                                               int
	Date                                                     string
}

// Percentiles of a latency in ms, with the number of samples.
type Percentiles struct {
	P50, P99, Max float64
	N             int
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		if i < 0 {
			i = 0
		}
		return float64(d[i].Microseconds()) / 1000
	}
	return Percentiles{P50: at(0.5), P99: at(0.99), Max: float64(d[len(d)-1].Microseconds()) / 1000, N: len(d)}
}

func medianMax[T int | int64 | float64](v []T) (T, T) {
	if len(v) == 0 {
		return 0, 0
	}
	s := append([]T(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

// LatencyKinds are the changes the bench times, in table order.
var LatencyKinds = []string{"policy-add", "acnp-change", "pod-add"}

// ReadResults reads a results file (JSON lines), the last line of each
// size winning.
func ReadResults(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	byN := map[int]Result{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		byN[r.Nodes] = r
	}
	var out []Result
	for _, r := range byN {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Nodes < out[j].Nodes })
	return out, nil
}

// Table prints the results, one row per size.
func Table(rs []Result) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "nodes\tpods\tpolicies\tctrl cpu-s\tctrl RSS MiB (peak)\tapiserver MiB\tetcd MiB\tmsgs/agent med/max\tKiB/agent med/max\twire KiB/agent med/max\tinitial sync s")
	for _, k := range LatencyKinds {
		fmt.Fprintf(w, "\t%s ms p50/p99", k)
	}
	fmt.Fprint(w, "\trestart→synced s\tchurn ops/s\tchurn ctrl cpu-s/s\tchurn→synced s\tmismatches\t\n")
	for _, r := range rs {
		fmt.Fprintf(w, "%d\t%d\t%d+%d\t%.1f\t%.0f (%.0f)\t%.0f\t%.0f\t%d/%d\t%.1f/%.1f\t%.1f/%.1f\t%.1f",
			r.Nodes, r.Pods, r.K8sPolicies, r.ACNPs, r.ControllerCPUSeconds, r.ControllerRSSMiB, r.ControllerPeakMiB,
			r.APIServerRSSMiB, r.EtcdRSSMiB, r.MsgsMedian, r.MsgsMax, r.KiBMedian, r.KiBMax, r.WireKiBMedian, r.WireKiBMax,
			r.InitialSyncSeconds)
		for _, k := range LatencyKinds {
			p := r.Latency[k]
			fmt.Fprintf(w, "\t%.0f/%.0f", p.P50, p.P99)
		}
		fmt.Fprintf(w, "\t%.1f\t%.0f\t%.2f\t%.1f\t%d\t\n", r.RestartSyncSeconds, r.ChurnOpsPerSecond, r.ChurnCPUPerSecond, r.ChurnSettleSeconds, r.Mismatches)
	}
	w.Flush()
	return b.String()
}

// series is one curve of the picture.
type series struct {
	name  string
	value func(Result) float64
}

// SVG draws each figure against the number of nodes (log scale on x), one
// small panel per figure, so the curves read at a glance.
func SVG(rs []Result) []byte {
	panels := []struct {
		title string
		unit  string
		lines []series
	}{
		{"controller", "CPU-s / RSS MiB", []series{
			{"CPU-s", func(r Result) float64 { return r.ControllerCPUSeconds }},
			{"peak RSS MiB", func(r Result) float64 { return r.ControllerPeakMiB }}}},
		{"per agent (must stay flat)", "KiB received", []series{
			{"median", func(r Result) float64 { return r.KiBMedian }},
			{"max", func(r Result) float64 { return r.KiBMax }}}},
		{"change → last agent", "ms (p99)", []series{
			{"policy-add", func(r Result) float64 { return r.Latency["policy-add"].P99 }},
			{"acnp-change", func(r Result) float64 { return r.Latency["acnp-change"].P99 }},
			{"pod-add", func(r Result) float64 { return r.Latency["pod-add"].P99 }}}},
		{"kube-apiserver / etcd", "RSS MiB", []series{
			{"kube-apiserver", func(r Result) float64 { return r.APIServerRSSMiB }},
			{"etcd", func(r Result) float64 { return r.EtcdRSSMiB }}}},
	}
	colors := []string{"#1f77b4", "#d62728", "#2ca02c"}
	const pw, ph, pad = 300, 200, 50
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		len(panels)*(pw+pad)+pad, ph+2*pad+20)
	minN, maxN := math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		minN, maxN = math.Min(minN, float64(r.Nodes)), math.Max(maxN, float64(r.Nodes))
	}
	if maxN <= minN {
		maxN = minN * 10
	}
	xOf := func(n int) float64 {
		return float64(pad) + (math.Log10(float64(n))-math.Log10(minN))/(math.Log10(maxN)-math.Log10(minN))*float64(pw-20) + 10
	}
	for pi, p := range panels {
		ox := float64(pi * (pw + pad))
		fmt.Fprintf(&b, `<g transform="translate(%.0f,0)">`, ox)
		fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13">%s</text>`, pad, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, pad, pad, pw, ph)
		top := 0.0
		for _, l := range p.lines {
			for _, r := range rs {
				top = math.Max(top, l.value(r))
			}
		}
		if top == 0 {
			top = 1
		}
		top *= 1.1
		yOf := func(v float64) float64 { return float64(pad+ph) - v/top*float64(ph) }
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.0f</text><text x="%d" y="%d">0</text>`, 2, pad+8, top, 30, pad+ph)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, pad, pad+ph+35, p.unit+" vs nodes (log)")
		for _, r := range rs {
			fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%d</text>`, xOf(r.Nodes), pad+ph+15, r.Nodes)
		}
		for li, l := range p.lines {
			var pts []string
			for _, r := range rs {
				x, y := xOf(r.Nodes), yOf(l.value(r))
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x, y, colors[li%len(colors)])
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(pts, " "), colors[li%len(colors)])
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`, pad+8, pad+15+li*14, colors[li%len(colors)], l.name)
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
