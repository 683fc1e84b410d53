package diagram

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// The service map is well-formed SVG, the same whatever the order of its
// edges, one arrow per edge, the denied one red, dashed and labelled so.
func TestServiceMapDrawsEveryEdgeTheDeniedOneMarked(t *testing.T) {
	edges := []MapEdge{
		{From: "a/client", To: "a/web", Port: "TCP/80", Connections: 3, Bytes: 5000},
		{From: "a/client", To: "a/db", Port: "TCP/5432", Connections: 1, Denied: true},
		{From: "10.0.0.9", To: "a/web", Port: "svc a/web:http", Connections: 2, Bytes: 2 << 20},
	}
	svg := ServiceMapSVG("map", edges)
	reversed := ServiceMapSVG("map", []MapEdge{edges[2], edges[1], edges[0]})
	if svg != reversed {
		t.Errorf("the picture depends on the order of the edges")
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	lines, denied := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
			for _, a := range se.Attr {
				if a.Name.Local == "stroke" && a.Value == "#b3261e" {
					denied++
				}
			}
		}
	}
	if lines != 3 || denied != 1 {
		t.Errorf("%d arrows, %d red; want 3 and 1", lines, denied)
	}
	for _, want := range []string{`class="edge denied" data-from="a/client" data-to="a/db"`, "✖ denied TCP/5432 · 1 conn",
		"TCP/80 · 3 conn · 4.9 KiB", "svc a/web:http · 2 conn · 2.0 MiB", `stroke-dasharray="6,4"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the map lacks %q", want)
		}
	}
}

// Many arrows leaving one client (the lab's Node addresses talk to every
// CoreDNS and the aggregator): every label has a line of its own, and every
// arrow runs level under its label until past the longest label, so no
// arrow crosses text.
func TestServiceMapLabelsNeitherOverlapNorAreCrossed(t *testing.T) {
	var edges []MapEdge
	for i, to := range []string{"kube-system/coredns-1", "kube-system/coredns-2", "flow-aggregator/flow-aggregator-858dcdc7f-xwg6d", "172.30.0.2", "kube-system/antrea-ui"} {
		edges = append(edges, MapEdge{From: "10.10.0.1", To: to, Port: "TCP/8080", Connections: i + 1, Bytes: uint64(i) << 12},
			MapEdge{From: "trial/intruder", To: to, Port: "svc trial/web:http", Connections: 2, Denied: i%2 == 0})
	}
	svg := ServiceMapSVG("map", edges)
	type label struct {
		x, y int
		text string
	}
	var labels []label
	var arrows [][][2]int
	dec := xml.NewDecoder(strings.NewReader(svg))
	inEdge := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch se := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range se.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case se.Name.Local == "g":
				inEdge = strings.HasPrefix(attr["class"], "edge")
			case se.Name.Local == "polyline":
				var pts [][2]int
				for _, p := range strings.Fields(attr["points"]) {
					var x, y int
					if _, err := fmt.Sscanf(p, "%d,%d", &x, &y); err != nil {
						t.Fatalf("points %q: %v", attr["points"], err)
					}
					pts = append(pts, [2]int{x, y})
				}
				arrows = append(arrows, pts)
			case se.Name.Local == "text" && inEdge:
				var l label
				fmt.Sscanf(attr["x"], "%d", &l.x)
				fmt.Sscanf(attr["y"], "%d", &l.y)
				labels = append(labels, l)
			}
		case xml.CharData:
			if inEdge && len(labels) > 0 && labels[len(labels)-1].text == "" {
				labels[len(labels)-1].text = string(se)
			}
		}
	}
	if len(labels) != len(edges) || len(arrows) != len(edges) {
		t.Fatalf("%d labels and %d arrows for %d edges", len(labels), len(arrows), len(edges))
	}
	// A 12px label is at most 7px a character wide (the estimate the map
	// uses is 6.6) and 12px tall.
	width := func(l label) int { return 7 * utf8.RuneCountInString(l.text) }
	for i, a := range labels {
		for j, b := range labels[:i] {
			if a.x < b.x+width(b) && b.x < a.x+width(a) && a.y-b.y < 13 && b.y-a.y < 13 {
				t.Errorf("labels %q (%d,%d) and %q (%d,%d) overlap", a.text, a.x, a.y, b.text, b.x, b.y)
			}
			_ = j
		}
		for _, pts := range arrows {
			// Only the level first segment may pass a label's x range; it
			// must not run through the text's height.
			for k := 1; k < len(pts); k++ {
				p, q := pts[k-1], pts[k]
				level := p[1] == q[1]
				if !level && min(p[0], q[0]) < a.x+width(a) {
					t.Errorf("a sloping segment %v-%v starts before the end of label %q (x %d..%d)", p, q, a.text, a.x, a.x+width(a))
				}
				if level && p[1] > a.y-12 && p[1] < a.y && min(p[0], q[0]) < a.x+width(a) && max(p[0], q[0]) > a.x {
					t.Errorf("arrow at y %d runs through label %q (baseline %d)", p[1], a.text, a.y)
				}
			}
		}
	}
}
