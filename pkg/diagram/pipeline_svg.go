package diagram

import (
	"fmt"
	"sort"
	"strings"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// The pipeline picture, written by hand (no Graphviz): stages are columns,
// pipelines rows, the tables of a cell stacked in table-number order, each
// box coloured by the feature that declares the table. Edges are cubic
// curves between box sides; their endpoints are spread along a side in the
// order of the other end, so parallel arrows do not overlap. The output
// depends only on the graph (no map order, no clock), so make docs gives the
// same bytes every time and a test can compare them with the committed file.

const (
	svgMargin   = 20.0
	svgTitleH   = 34.0
	svgHeaderH  = 26.0
	svgRowLabel = 100.0
	svgColW     = 196.0
	svgBoxW     = 170.0
	svgBoxGap   = 16.0
	svgRowPad   = 22.0
	svgLegendH  = 64.0
)

var featureColors = map[string]string{
	"PodConnectivity": "#dbeafe",
	"NetworkPolicy":   "#fde2e2",
	"Service":         "#dcfce7",
	// LoadBalancerSourceRanges guards Service ports: a Service-like hue.
	"LoadBalancerSourceRanges": "#fef9c3",
}

// edgeStyle is how an edge kind is drawn: colour and dash pattern.
var edgeStyles = map[string]struct{ color, dash, label string }{
	string(agentof.EdgeGoto):     {"#374151", "", "goto_table"},
	string(agentof.EdgeResubmit): {"#374151", "6 3", "resubmit"},
	string(agentof.EdgeCT):       {"#1d4ed8", "", "ct(table=…)"},
	string(agentof.EdgeGroup):    {"#c2410c", "", "group bucket → resubmit"},
	string(agentof.EdgeLearn):    {"#6b7280", "2 3", "learn (writes flows into)"},
}

var edgeKindOrder = []string{string(agentof.EdgeGoto), string(agentof.EdgeResubmit), string(agentof.EdgeCT),
	string(agentof.EdgeGroup), string(agentof.EdgeLearn)}

type svgBox struct{ x, y, w, h float64 }

// svgLayout places the tables.
type svgLayout struct {
	boxes         map[string]svgBox
	col           map[string]int
	width, height float64
	rowY, rowH    []float64
	boxH          float64
}

func layoutPipeline(gr *Pipeline) *svgLayout {
	l := &svgLayout{boxes: map[string]svgBox{}, col: map[string]int{}, boxH: 40}
	live := len(gr.Tables) > 0 && gr.Tables[0].Flows != nil
	if live {
		l.boxH = 54
	}
	stageCol := map[string]int{}
	for i, s := range gr.Stages {
		stageCol[s] = i
	}
	pipeRow := map[string]int{}
	for i, p := range gr.Pipelines {
		pipeRow[p] = i
	}
	type cell struct{ row, col int }
	cells := map[cell][]Table{}
	for _, t := range gr.Tables {
		c := cell{pipeRow[t.Pipeline], stageCol[t.Stage]}
		cells[c] = append(cells[c], t)
	}
	maxStack := make([]int, len(gr.Pipelines))
	for c, ts := range cells {
		if len(ts) > maxStack[c.row] {
			maxStack[c.row] = len(ts)
		}
	}
	y := svgMargin + svgTitleH + svgHeaderH
	for r := range gr.Pipelines {
		n := maxStack[r]
		if n == 0 {
			n = 1
		}
		h := float64(n)*l.boxH + float64(n-1)*svgBoxGap + 2*svgRowPad
		l.rowY = append(l.rowY, y)
		l.rowH = append(l.rowH, h)
		y += h
	}
	for c, ts := range cells {
		stackH := float64(len(ts))*l.boxH + float64(len(ts)-1)*svgBoxGap
		top := l.rowY[c.row] + (l.rowH[c.row]-stackH)/2
		for i, t := range ts {
			x := svgMargin + svgRowLabel + float64(c.col)*svgColW + (svgColW-svgBoxW)/2
			l.boxes[t.Name] = svgBox{x, top + float64(i)*(l.boxH+svgBoxGap), svgBoxW, l.boxH}
			l.col[t.Name] = c.col
		}
	}
	l.width = 2*svgMargin + svgRowLabel + float64(len(gr.Stages))*svgColW
	l.height = y + svgLegendH + svgMargin
	return l
}

type side int

const (
	sideLeft side = iota
	sideRight
)

type svgEdge struct {
	e              Edge
	from, to       svgBox
	fromSide       side
	toSide         side
	self           bool
	x1, y1, x2, y2 float64
}

func PipelineSVG(gr *Pipeline) []byte {
	l := layoutPipeline(gr)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n",
		l.width, l.height, l.width, l.height)
	b.WriteString("<defs>\n")
	for _, k := range edgeKindOrder {
		fmt.Fprintf(&b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n",
			markerID(k), edgeStyles[k].color)
	}
	b.WriteString("</defs>\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#ffffff"/>`+"\n", l.width, l.height)
	title := "Antrea OVS pipeline (br-int): the layout pkg/agent/openflow declares, edges from the flows its client installs"
	switch {
	case gr.Source == "declared":
	case len(gr.Tables) > 0 && gr.Tables[0].Flows != nil && gr.Tables[0].Packets == nil:
		title = "Antrea OVS pipeline (br-int) of " + gr.Source + ": flows per table as its agent reports them, edges of the declared layout"
	default:
		title = "Antrea OVS pipeline (br-int) of " + gr.Source + ": flows and matched packets per table, edges from its flows"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="16" font-weight="bold">%s</text>`+"\n", svgMargin, svgMargin+16, xmlEscape(title))
	// Stage headers and grid.
	gridTop := svgMargin + svgTitleH
	gridBottom := l.rowY[len(l.rowY)-1] + l.rowH[len(l.rowH)-1]
	for i, s := range gr.Stages {
		x := svgMargin + svgRowLabel + float64(i)*svgColW
		fill := "#f9fafb"
		if i%2 == 1 {
			fill = "#f3f4f6"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, gridTop, svgColW, gridBottom-gridTop, fill)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" font-weight="bold" text-anchor="middle" fill="#4b5563">%s</text>`+"\n",
			x+svgColW/2, gridTop+17, xmlEscape(s))
	}
	for r, p := range gr.Pipelines {
		y := l.rowY[r]
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d1d5db"/>`+"\n", svgMargin, y, l.width-svgMargin, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" font-weight="bold" fill="#4b5563">%s</text>`+"\n",
			svgMargin+4, y+l.rowH[r]/2+4, xmlEscape(p+" pipeline"))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#d1d5db"/>`+"\n", svgMargin, gridBottom, l.width-svgMargin, gridBottom)
	// Edges under the boxes.
	for _, se := range routeEdges(gr, l) {
		st := edgeStyles[se.e.Kind]
		var d string
		switch {
		case se.self:
			d = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", se.x1, se.y1, se.x1, se.y1-26, se.x2, se.y2-26, se.x2, se.y2)
		case se.fromSide == sideRight && se.toSide == sideLeft:
			dx := (se.x2 - se.x1) / 2
			d = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", se.x1, se.y1, se.x1+dx, se.y1, se.x2-dx, se.y2, se.x2, se.y2)
		default:
			// Same column: bulge out of the side both ends are on.
			out := 14 + absf(se.y2-se.y1)*0.12
			if se.fromSide == sideLeft {
				out = -out
			}
			d = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", se.x1, se.y1, se.x1+out, se.y1, se.x2+out, se.y2, se.x2, se.y2)
		}
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		tip := fmt.Sprintf("%s → %s: %s, %d flow(s)", se.e.From, se.e.To, se.e.Kind, se.e.Flows)
		if se.e.Packets != nil {
			tip += fmt.Sprintf(", %d packet(s)", *se.e.Packets)
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.3"%s marker-end="url(#arrow-%s)"><title>%s</title></path>`+"\n",
			d, st.color, dash, markerID(se.e.Kind), xmlEscape(tip))
	}
	// Tables.
	for _, t := range gr.Tables {
		bx, ok := l.boxes[t.Name]
		if !ok {
			continue
		}
		fill := featureColors[t.Feature]
		if fill == "" {
			fill = "#eeeeee"
		}
		fmt.Fprintf(&b, `<g><title>%s</title>`, xmlEscape(fmt.Sprintf("%s (table %d, %s): %s", t.Name, t.ID, t.Feature, t.Doc)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="5" fill="%s" stroke="#6b7280"/>`, bx.x, bx.y, bx.w, bx.h, fill)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" font-weight="bold" text-anchor="middle">%s</text>`, bx.x+bx.w/2, bx.y+16, xmlEscape(t.Name))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#374151">%s</text>`,
			bx.x+bx.w/2, bx.y+31, xmlEscape(fmt.Sprintf("table %d · miss: %s", t.ID, t.Miss)))
		if t.Flows != nil {
			count := fmt.Sprintf("%d flows", *t.Flows)
			if t.Packets != nil {
				count += fmt.Sprintf(" · %d pkts", *t.Packets)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#111827">%s</text>`,
				bx.x+bx.w/2, bx.y+46, xmlEscape(count))
		}
		b.WriteString("</g>\n")
	}
	// Legend.
	ly := gridBottom + 22
	x := svgMargin
	b.WriteString(`<g font-size="11">` + "\n")
	for _, f := range gr.Features {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="16" height="12" rx="2" fill="%s" stroke="#6b7280"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			x, ly-10, featureColors[f], x+22, ly, xmlEscape(f+" feature"))
		// 190 px, or more for a long name (about 6.5 px a character).
		x += max(190, 40+6.5*float64(len(f+" feature")))
	}
	x = svgMargin
	ly += 24
	for _, k := range edgeKindOrder {
		st := edgeStyles[k]
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.3"%s marker-end="url(#arrow-%s)"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			x, ly-4, x+34, ly-4, st.color, dash, markerID(k), x+42, ly, xmlEscape(st.label))
		x += 210
	}
	b.WriteString("</g>\n</svg>\n")
	return []byte(b.String())
}

// routeEdges picks the sides each edge leaves and enters by and spreads the
// endpoints along each side.
func routeEdges(gr *Pipeline, l *svgLayout) []*svgEdge {
	var out []*svgEdge
	type port struct {
		box   string
		side  side
		start bool
		e     *svgEdge
	}
	ports := map[string][]port{}
	key := func(box string, s side) string { return fmt.Sprintf("%s/%d", box, s) }
	for _, e := range gr.Edges {
		from, ok1 := l.boxes[e.From]
		to, ok2 := l.boxes[e.To]
		if !ok1 || !ok2 {
			continue
		}
		se := &svgEdge{e: e, from: from, to: to}
		out = append(out, se)
		if e.From == e.To {
			se.self = true
			continue
		}
		switch {
		case l.col[e.To] > l.col[e.From]:
			se.fromSide, se.toSide = sideRight, sideLeft
		case l.col[e.To] < l.col[e.From], to.y < from.y:
			se.fromSide, se.toSide = sideLeft, sideLeft
		default:
			se.fromSide, se.toSide = sideRight, sideRight
		}
		ports[key(e.From, se.fromSide)] = append(ports[key(e.From, se.fromSide)], port{e.From, se.fromSide, true, se})
		ports[key(e.To, se.toSide)] = append(ports[key(e.To, se.toSide)], port{e.To, se.toSide, false, se})
	}
	// Self loops: a row of small loops on the box's top edge, by kind.
	selfN := map[string]int{}
	for _, se := range out {
		if se.self {
			i := selfN[se.e.From]
			selfN[se.e.From]++
			x := se.from.x + se.from.w - 46 + float64(i)*16
			se.x1, se.y1, se.x2, se.y2 = x-10, se.from.y, x, se.from.y
		}
	}
	keys := make([]string, 0, len(ports))
	for k := range ports {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ps := ports[k]
		other := func(p port) float64 {
			if p.start {
				return p.e.to.y
			}
			return p.e.from.y
		}
		sort.SliceStable(ps, func(i, j int) bool {
			if other(ps[i]) != other(ps[j]) {
				return other(ps[i]) < other(ps[j])
			}
			return ps[i].e.e.Kind < ps[j].e.e.Kind
		})
		for i, p := range ps {
			bx := l.boxes[p.box]
			y := bx.y + bx.h*float64(i+1)/float64(len(ps)+1)
			x := bx.x
			if p.side == sideRight {
				x = bx.x + bx.w
			}
			if p.start {
				p.e.x1, p.e.y1 = x, y
			} else {
				p.e.x2, p.e.y2 = x, y
			}
		}
	}
	return out
}

func markerID(kind string) string { return strings.ReplaceAll(kind, "_", "-") }

func absf(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// PipelineDot is the graph in Graphviz's language: a cluster per pipeline,
// tables ranked by stage.
func PipelineDot(gr *Pipeline) []byte {
	var b strings.Builder
	b.WriteString("digraph pipeline {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprintf(&b, "  label=%q;\n", "Antrea OVS pipeline ("+gr.Source+")")
	for _, p := range gr.Pipelines {
		fmt.Fprintf(&b, "  subgraph %q {\n    label=%q;\n", "cluster_"+p, p+" pipeline")
		for _, t := range gr.Tables {
			if t.Pipeline != p {
				continue
			}
			label := fmt.Sprintf("%s\\ntable %d · %s · miss: %s", t.Name, t.ID, t.Stage, t.Miss)
			if t.Flows != nil && t.Packets != nil {
				label += fmt.Sprintf("\\n%d flows · %d pkts", *t.Flows, *t.Packets)
			}
			color := featureColors[t.Feature]
			if color == "" {
				color = "#eeeeee"
			}
			fmt.Fprintf(&b, "    %q [label=\"%s\", fillcolor=%q, tooltip=%q];\n", t.Name, label, color, t.Doc)
		}
		b.WriteString("  }\n")
	}
	for _, e := range gr.Edges {
		st := edgeStyles[e.Kind]
		style := "solid"
		switch st.dash {
		case "6 3":
			style = "dashed"
		case "2 3":
			style = "dotted"
		}
		label := e.Kind
		if e.Packets != nil {
			label += fmt.Sprintf(" (%d pkts)", *e.Packets)
		}
		fmt.Fprintf(&b, "  %q -> %q [label=%q, color=%q, style=%s, fontsize=8];\n", e.From, e.To, label, st.color, style)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// EdgeKinds are the edge kinds the pictures draw, in legend order.
func EdgeKinds() []string { return append([]string(nil), edgeKindOrder...) }
