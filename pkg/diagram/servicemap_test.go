package diagram

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
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
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "line" {
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
