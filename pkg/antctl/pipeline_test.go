package antctl

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/diagram"
)

const pipelineSVGPath = "../../docs/design/ovs-pipeline.svg"

// The committed picture is what make docs writes today.
func TestPipelineSVGIsCurrent(t *testing.T) {
	gr, err := diagram.DeclaredPipeline()
	if err != nil {
		t.Fatal(err)
	}
	want := diagram.PipelineSVG(gr)
	got, err := os.ReadFile(pipelineSVGPath)
	if err != nil {
		t.Fatalf("%v: run make docs", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/design/ovs-pipeline.svg is stale (the declared tables or the flows between them changed): run make docs and commit it")
	}
}

// The picture is well-formed XML with a box per declared table and an arrow
// per edge, whatever the output format the same graph.
func TestPipelineFormats(t *testing.T) {
	gr, err := diagram.DeclaredPipeline()
	if err != nil {
		t.Fatal(err)
	}
	svg := runAntctl(t, nil, "get", "pipeline", "--declared", "-o", "svg")
	if svg.runErr != nil {
		t.Fatal(svg.runErr)
	}
	d := xml.NewDecoder(strings.NewReader(svg.out))
	rects, paths := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "rect":
				rects++
			case "path":
				paths++
			}
		}
	}
	// Each table is a rect; so are the column bands, the background and the legend's feature swatches.
	if want := len(gr.Tables) + len(gr.Stages) + 1 + len(gr.Features); rects != want {
		t.Errorf("SVG has %d rects, want %d (tables + stage bands + background + legend)", rects, want)
	}
	// Markers have a path each; every edge is one more.
	if want := len(gr.Edges) + len(diagram.EdgeKinds()); paths != want {
		t.Errorf("SVG has %d paths, want %d (edges + arrow markers)", paths, want)
	}
	for _, tb := range gr.Tables {
		if !strings.Contains(svg.out, ">"+tb.Name+"</text>") {
			t.Errorf("SVG lacks table %s", tb.Name)
		}
	}
	dot := runAntctl(t, nil, "get", "pipeline", "--declared", "-o", "dot")
	if dot.runErr != nil || strings.Count(dot.out, " -> ") != len(gr.Edges) || !strings.HasPrefix(dot.out, "digraph pipeline {") {
		t.Errorf("-o dot: %v\n%s", dot.runErr, dot.out)
	}
	tbl := runAntctl(t, nil, "get", "pipeline", "--declared")
	if tbl.runErr != nil || strings.Count(tbl.out, "\n") != len(gr.Tables)+1 {
		t.Errorf("-o table: %v\n%s", tbl.runErr, tbl.out)
	}
	bad := runAntctl(t, nil, "get", "pipeline", "--declared", "-o", "sgv")
	if bad.runErr == nil || !strings.Contains(bad.runErr.Error(), `unknown output format "sgv" (did you mean "svg"?)`) {
		t.Errorf("-o sgv: %v", bad.runErr)
	}
	notLocal := runAntctl(t, nil, "get", "pipeline")
	if notLocal.runErr == nil || !strings.Contains(notLocal.runErr.Error(), "--declared") {
		t.Errorf("get pipeline from a laptop: %v, want the local-mode error pointing at --declared", notLocal.runErr)
	}
}

var (
	ofctlTable = regexp.MustCompile(`table=(\d+),`)
	ofctlPkts  = regexp.MustCompile(`n_packets=(\d+),`)
	ofctlGoto  = regexp.MustCompile(`goto_table:(\d+)`)
)

// A node's live pipeline counts, per table, the flows and packets
// ovs-ofctl dump-flows shows, and its goto_table edges are those of the
// dump.
func TestLivePipelineCountsWhatOVSHolds(t *testing.T) {
	n := newNode(t)
	n.addPod(t, web0)
	n.addPod(t, client)
	bridgetest.Run(t, "ip", "netns", "exec", n.pods[web0.Name].NS, "ping", "-c", "2", "-i", "0.2", "-W", "2", client.Status.PodIP)
	r := n.antctl(t, nil, "get", "pipeline", "-o", "json")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	var gr diagram.Pipeline
	if err := json.Unmarshal([]byte(r.out), &gr); err != nil {
		t.Fatal(err)
	}
	dump, err := n.br.Ofctl("dump-flows", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	flows := map[int]int{}
	pkts := map[int]uint64{}
	gotos := map[string]bool{}
	for _, l := range strings.Split(dump, "\n") {
		m := ofctlTable.FindStringSubmatch(l)
		if m == nil {
			if strings.Contains(l, "n_packets=") { // table 0 is not printed
				m = []string{"", "0"}
			} else {
				continue
			}
		}
		tb, _ := strconv.Atoi(m[1])
		flows[tb]++
		p, _ := strconv.ParseUint(ofctlPkts.FindStringSubmatch(l)[1], 10, 64)
		pkts[tb] += p
		for _, g := range ofctlGoto.FindAllStringSubmatch(l, -1) {
			to, _ := strconv.Atoi(g[1])
			gotos[fmt.Sprintf("%d->%d", tb, to)] = true
		}
	}
	classifier, _ := n.flows.Pipeline().Lookup("Classifier")
	for _, tb := range gr.Tables {
		if tb.Flows == nil || tb.Packets == nil {
			t.Fatalf("table %s has no counts in %s", tb.Name, r.out)
		}
		if *tb.Flows != flows[int(tb.ID)] {
			t.Errorf("table %s: %d flows, ovs-ofctl dumps %d", tb.Name, *tb.Flows, flows[int(tb.ID)])
		}
		// antctl read first: packets only grow (the pods' own IPv6 chatter).
		if *tb.Packets > pkts[int(tb.ID)] {
			t.Errorf("table %s: %d packets, more than the %d of the later ovs-ofctl dump", tb.Name, *tb.Packets, pkts[int(tb.ID)])
		}
		// OVS credits a flow with the first packet of each datapath flow
		// at once, the rest when its revalidator runs: at least the first
		// echo request and the first reply.
		if tb.ID == classifier.ID && *tb.Packets < 2 {
			t.Errorf("Classifier matched %d packets, want at least the first echo request and reply", *tb.Packets)
		}
	}
	id := map[string]uint8{}
	for _, tb := range gr.Tables {
		id[tb.Name] = tb.ID
	}
	got := map[string]bool{}
	for _, e := range gr.Edges {
		if e.Kind == "goto_table" {
			got[fmt.Sprintf("%d->%d", id[e.From], id[e.To])] = true
		}
	}
	for e := range gotos {
		if !got[e] {
			t.Errorf("ovs-ofctl shows goto_table edge %s, antctl does not", e)
		}
	}
	for e := range got {
		if !gotos[e] {
			t.Errorf("antctl shows goto_table edge %s, ovs-ofctl does not", e)
		}
	}
	svg := n.antctl(t, nil, "get", "pipeline", "-o", "svg")
	if svg.runErr != nil || !regexp.MustCompile(`\d+ flows · \d+ pkts`).MatchString(svg.out) {
		t.Errorf("live -o svg: %v; want flow and packet counts in the boxes", svg.runErr)
	}
}
