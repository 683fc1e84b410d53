package diagram

import (
	"encoding/xml"
	"strings"
	"testing"
)

// An agent's reported flow counts go on the declared layout's tables; a
// table number the layout lacks is listed, and the picture shows flows
// without packet counts (the report has none).
func TestWithFlowCountsPutsAnAgentsCountsOnTheDeclaredTables(t *testing.T) {
	gr, err := DeclaredPipeline()
	if err != nil {
		t.Fatal(err)
	}
	gr = WithFlowCounts(gr, "node node-1", map[string]int32{"0": 7, "2": 41, "250": 3})
	for _, tb := range gr.Tables {
		want := 0
		switch tb.ID {
		case 0:
			want = 7
		case 2:
			want = 41
		}
		if tb.Flows == nil || *tb.Flows != want || tb.Packets != nil {
			t.Errorf("table %d %s: flows %v packets %v, want %d and no packets", tb.ID, tb.Name, tb.Flows, tb.Packets, want)
		}
	}
	if len(gr.Unknown) != 1 || gr.Unknown[0] != 250 {
		t.Errorf("unknown tables %v, want [250]", gr.Unknown)
	}
	svg := string(PipelineSVG(gr))
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if !strings.Contains(svg, ">41 flows</text>") || strings.Contains(svg, "pkts") || !strings.Contains(svg, "of node node-1: flows per table as its agent reports them") {
		t.Errorf("the SVG does not show the reported counts alone with its title")
	}
}
