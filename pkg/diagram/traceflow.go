package diagram

import (
	"fmt"
	"html"
	"strconv"
	"strings"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The picture of a Traceflow: a box for the source Pod, then one box per
// observation in path order, grouped by Node (a frame around each Node's
// boxes), an arrow between consecutive boxes (the one that leaves a Node
// for the next through the tunnel says so), and a box for the destination
// when the packet was delivered. TraceflowDOT writes it as Graphviz DOT,
// TraceflowSVG draws it itself (one column, top to bottom).

// tfBox is one box of the picture.
type tfBox struct {
	id    string
	node  int // index into tfGraph.nodes; -1 outside any Node
	title string
	lines []string
	// kind colours it: "source", "ok", "drop", "end".
	kind string
}

// tfEdge joins two boxes.
type tfEdge struct {
	from, to int
	label    string
}

type tfGraph struct {
	title string
	nodes []string // "node-1 (Sender)"
	boxes []tfBox
	edges []tfEdge
}

func traceflowGraph(tf *crdv1beta1.Traceflow) *tfGraph {
	g := &tfGraph{title: fmt.Sprintf("Traceflow %s: %s", tf.Name, tf.Status.Phase)}
	src := tf.Spec.Source.Namespace + "/" + tf.Spec.Source.Pod
	if tf.Spec.Source.Pod == "" {
		src = tf.Spec.Source.IP
	}
	g.boxes = append(g.boxes, tfBox{id: "source", node: -1, title: "Source", lines: []string{src}, kind: "source"})
	tunnel := ""
	for ni, r := range tf.Status.Results {
		g.nodes = append(g.nodes, fmt.Sprintf("%s (%s)", r.Node, r.Role))
		for oi, o := range r.Observations {
			b := tfBox{id: fmt.Sprintf("n%d_o%d", ni, oi), node: ni, title: fmt.Sprintf("%s: %s", o.Component, o.Action), kind: "ok"}
			if o.ComponentInfo != "" {
				b.lines = append(b.lines, "table "+o.ComponentInfo)
			}
			if d := ObservationDetails(o); d != "" {
				b.lines = append(b.lines, d)
			}
			switch o.Action {
			case crdv1beta1.ActionDropped, crdv1beta1.ActionRejected:
				b.kind = "drop"
			case crdv1beta1.ActionDelivered, crdv1beta1.ActionForwardedOutOfOverlay:
				b.kind = "end"
			}
			label := ""
			if oi == 0 && tunnel != "" {
				label = "tunnel " + tunnel
			}
			g.edges = append(g.edges, tfEdge{from: len(g.boxes) - 1, to: len(g.boxes), label: label})
			g.boxes = append(g.boxes, b)
			tunnel = ""
			if o.TunnelDstIP != "" {
				tunnel = o.TunnelDstIP
			}
		}
	}
	if tf.Status.Phase == crdv1beta1.TraceflowFailed {
		g.edges = append(g.edges, tfEdge{from: len(g.boxes) - 1, to: len(g.boxes)})
		g.boxes = append(g.boxes, tfBox{id: "failed", node: -1, title: "Failed", lines: []string{tf.Status.Reason}, kind: "drop"})
	}
	return g
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

var dotColors = map[string]string{"source": "#dbe9f6", "ok": "#eeeeee", "drop": "#f8c9c4", "end": "#cdebc5"}

// TraceflowDOT is the Traceflow's path as a Graphviz digraph.
func TraceflowDOT(tf *crdv1beta1.Traceflow) string {
	g := traceflowGraph(tf)
	var b strings.Builder
	fmt.Fprintf(&b, "digraph traceflow {\n  label=%s;\n  labelloc=t;\n  rankdir=TB;\n", dotQuote(g.title))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	box := func(x tfBox) {
		label := strings.Join(append([]string{x.title}, x.lines...), "\n")
		fmt.Fprintf(&b, "    %s [label=%s, fillcolor=%s];\n", x.id, dotQuote(label), dotQuote(dotColors[x.kind]))
	}
	for _, x := range g.boxes {
		if x.node < 0 {
			box(x)
		}
	}
	for ni, name := range g.nodes {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n    style=rounded;\n", ni, dotQuote(name))
		for _, x := range g.boxes {
			if x.node == ni {
				box(x)
			}
		}
		b.WriteString("  }\n")
	}
	for _, e := range g.edges {
		fmt.Fprintf(&b, "  %s -> %s", g.boxes[e.from].id, g.boxes[e.to].id)
		if e.label != "" {
			fmt.Fprintf(&b, " [label=%s]", dotQuote(e.label))
		}
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Layout of the SVG, in pixels.
const (
	svgMinBoxW   = 400
	svgCharW     = 7.5 // a character of the 13 px font, wide enough for most
	svgLineH     = 16
	svgBoxPad    = 10
	svgGap       = 34
	svgFramePad  = 14
	svgFrameHead = 22
	svgTop       = 44
)

var svgFill = map[string]string{"source": "#dbe9f6", "ok": "#f4f4f4", "drop": "#f8c9c4", "end": "#cdebc5"}

func svgText(s string) string { return html.EscapeString(s) }

// TraceflowSVG draws the Traceflow's path: boxes top to bottom, each
// Node's boxes in a frame, arrows between them.
func TraceflowSVG(tf *crdv1beta1.Traceflow) string {
	g := traceflowGraph(tf)
	type placed struct{ y, h int }
	pos := make([]placed, len(g.boxes))
	frames := make([][2]int, len(g.nodes)) // top, bottom
	for i := range frames {
		frames[i] = [2]int{-1, -1}
	}
	y := svgTop
	prevNode := -2
	for i, x := range g.boxes {
		if x.node != prevNode {
			if prevNode >= 0 {
				y += svgFramePad
			}
			if x.node >= 0 {
				frames[x.node][0] = y
				y += svgFrameHead
			}
			prevNode = x.node
		}
		h := svgBoxPad*2 + svgLineH*(1+len(x.lines))
		pos[i] = placed{y: y, h: h}
		y += h
		if x.node >= 0 {
			frames[x.node][1] = y + svgFramePad
		}
		y += svgGap
	}
	height := y
	// Boxes as wide as their longest line.
	svgBoxWidth := svgMinBoxW
	for _, x := range g.boxes {
		for _, l := range append([]string{x.title}, x.lines...) {
			svgBoxWidth = max(svgBoxWidth, 24+int(float64(len(l))*svgCharW))
		}
	}
	svgWidth := svgBoxWidth + 120
	left := (svgWidth - svgBoxWidth) / 2
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		svgWidth, height, svgWidth, height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker></defs>` + "\n")
	fmt.Fprintf(&b, `<text class="title" x="%d" y="24" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", svgWidth/2, svgText(g.title))
	for i, name := range g.nodes {
		top, bottom := frames[i][0], frames[i][1]
		fmt.Fprintf(&b, `<g class="node" id="node-%d"><rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="none" stroke="#7a8ca5" stroke-dasharray="5,3"/><text x="%d" y="%d" font-weight="bold" fill="#3b4d66">%s</text></g>`+"\n",
			i, left-svgFramePad, top, svgBoxWidth+2*svgFramePad, bottom-top, left-svgFramePad+8, top+16, svgText(name))
	}
	for i, x := range g.boxes {
		p := pos[i]
		fmt.Fprintf(&b, `<g class="box %s" id="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="#555"/>`,
			x.kind, x.id, left, p.y, svgBoxWidth, p.h, svgFill[x.kind])
		ty := p.y + svgBoxPad + 12
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`, left+12, ty, svgText(x.title))
		for _, l := range x.lines {
			ty += svgLineH
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, left+12, ty, svgText(l))
		}
		b.WriteString("</g>\n")
	}
	for _, e := range g.edges {
		from, to := pos[e.from], pos[e.to]
		x := svgWidth / 2
		fmt.Fprintf(&b, `<g class="edge" data-from="%s" data-to="%s"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444" stroke-width="1.5" marker-end="url(#arrow)"/>`,
			g.boxes[e.from].id, g.boxes[e.to].id, x, from.y+from.h, x, to.y)
		if e.label != "" {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#3b4d66">%s</text>`, x+8, (from.y+from.h+to.y)/2+4, svgText(e.label))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// ObservationDetails is what an observation adds to its component and
// action: the policy rule, endpoint, tunnel, Pod and TTL it names.
func ObservationDetails(o crdv1beta1.Observation) string {
	var parts []string
	if o.NetworkPolicy != "" {
		p := "policy " + o.NetworkPolicy
		if o.NetworkPolicyRule != "" {
			p += " rule " + o.NetworkPolicyRule
		}
		parts = append(parts, p)
	}
	if o.TranslatedDstIP != "" {
		parts = append(parts, "endpoint "+o.TranslatedDstIP)
	}
	if o.TunnelDstIP != "" {
		parts = append(parts, "tunnel to "+o.TunnelDstIP)
	}
	if o.Pod != "" {
		parts = append(parts, "pod "+o.Pod)
	}
	if o.TTL != 0 && (o.Action == crdv1beta1.ActionDelivered || o.Action == crdv1beta1.ActionForwarded && o.Component == crdv1beta1.ComponentForwarding) {
		parts = append(parts, "ttl "+strconv.Itoa(int(o.TTL)))
	}
	return strings.Join(parts, ", ")
}
