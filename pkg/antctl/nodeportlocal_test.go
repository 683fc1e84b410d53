package antctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/antctl/query/querytest"
)

// TestNodePortLocalShowsEachPodsMappings: the mappings come from the Pods'
// annotations (upstream's JSON, as the agent writes it), sorted, one row
// each; a Pod without the annotation has none; a garbled annotation is an
// error naming its Pod; an unknown Pod gets a hint.
func TestNodePortLocalShowsEachPodsMappings(t *testing.T) {
	web := querytest.Pod("default", "web-1", "node-1", "10.10.0.5")
	web.Annotations = map[string]string{"nodeportlocal.antrea.io": `[{"podPort":8080,"nodeIP":"172.30.0.11","nodePort":61001,"protocol":"tcp","protocols":["tcp"]},` +
		`{"podPort":53,"nodeIP":"172.30.0.11","nodePort":61000,"protocol":"udp","protocols":["udp"],"ipFamily":"IPv4"}]`}
	plain := querytest.Pod("default", "plain", "node-2", "10.10.1.5")
	garbled := querytest.Pod("demo", "broken", "node-2", "10.10.1.6")
	garbled.Annotations = map[string]string{"nodeportlocal.antrea.io": `{"podPort":`}
	c := &querytest.Cluster{Extra: []runtime.Object{web, plain, garbled}}
	clients := c.Clients()
	ctx := context.Background()

	ms, err := query.NodePortLocal(ctx, clients, "default", "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeNodePortLocalTable(&out, ms); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"NAMESPACE", "POD", "NODE", "POD-PORT", "PROTOCOL", "NODE-IP:PORT"},
		{"default", "web-1", "node-1", "8080", "tcp", "172.30.0.11:61001"},
		{"default", "web-1", "node-1", "53", "udp", "172.30.0.11:61000"},
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
	if ms, err := query.NodePortLocal(ctx, clients, "default", "plain"); err != nil || len(ms) != 0 {
		t.Errorf("a Pod without the annotation: %v, %v; want no mapping", ms, err)
	}
	if _, err := query.NodePortLocal(ctx, clients, "", ""); err == nil || !strings.Contains(err.Error(), "demo/broken") {
		t.Errorf("every namespace with a garbled annotation: err = %v, want one naming demo/broken", err)
	}
	if _, err := query.NodePortLocal(ctx, clients, "default", "web-2"); err == nil || !strings.Contains(err.Error(), "web-1") {
		t.Errorf("an unknown Pod: err = %v, want a hint naming web-1", err)
	}
}
