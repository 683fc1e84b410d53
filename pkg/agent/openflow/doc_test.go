package openflow

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestPipelineDocListsEveryTable keeps docs/design/ovs-pipeline.md equal to
// the code: its "### Name" sections, in order, are the pipeline's tables.
func TestPipelineDocListsEveryTable(t *testing.T) {
	f, err := os.Open("../../../docs/design/ovs-pipeline.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc []string
	inTables := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inTables = line == "## Tables"
		}
		if inTables && strings.HasPrefix(line, "### ") {
			doc = append(doc, strings.TrimPrefix(line, "### "))
		}
	}
	c, err := NewClient(newRecordingBridge(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, tb := range c.Pipeline().Tables() {
		code = append(code, tb.Name)
	}
	if strings.Join(doc, ",") != strings.Join(code, ",") {
		t.Fatalf("docs/design/ovs-pipeline.md lists tables\n  %s\nbut the pipeline has\n  %s", strings.Join(doc, ", "), strings.Join(code, ", "))
	}
}
