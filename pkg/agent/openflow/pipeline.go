package openflow

import (
	"fmt"
	"sort"
)

// StageID orders the steps a packet goes through inside one pipeline. Tables of
// one pipeline are laid out by stage, so a feature adds a table to a stage
// without renumbering the others.
type StageID int

// Stages, in the order a packet meets them.
const (
	ClassifierStage StageID = iota
	ValidationStage
	ConntrackStateStage
	PreRoutingStage
	EgressSecurityStage
	RoutingStage
	PostRoutingStage
	SwitchingStage
	IngressSecurityStage
	ConntrackStage
	OutputStage
)

var stageNames = [...]string{"Classifier", "Validation", "ConntrackState", "PreRouting", "EgressSecurity",
	"Routing", "PostRouting", "Switching", "IngressSecurity", "Conntrack", "Output"}

func (s StageID) String() string { return stageNames[s] }

// PipelineID names a pipeline: the root classifier sends each packet to the
// pipeline of its protocol.
type PipelineID int

// Pipelines. Root holds only the first table; ARP and IP packets continue in
// their own pipeline.
const (
	PipelineRoot PipelineID = iota
	PipelineARP
	PipelineIP
)

var pipelineNames = [...]string{"Root", "ARP", "IP"}

func (p PipelineID) String() string { return pipelineNames[p] }

// TableSpec declares a table once: its name, where it sits, and what a packet
// that matches no flow meets (every table's miss behaviour is deliberate).
type TableSpec struct {
	Name     string
	Stage    StageID
	Pipeline PipelineID
	// Miss is what the table-miss flow does: MissNext goes on to the next
	// table of the pipeline, MissDrop drops.
	Miss MissAction
	// Doc is one sentence for docs/design/ovs-pipeline.md and antctl.
	Doc string
}

// MissAction is a table's behaviour for packets no other flow matches.
type MissAction int

// Miss behaviours.
const (
	MissNext MissAction = iota
	MissDrop
	// MissNormal hands the packet to OVS's L2 learning switch.
	MissNormal
)

func (m MissAction) String() string {
	switch m {
	case MissDrop:
		return "drop"
	case MissNormal:
		return "NORMAL"
	}
	return "next table"
}

// Table is a declared table with the OpenFlow table number assigned at start.
type Table struct {
	*TableSpec
	ID uint8
	// next is the table a MissNext or "go on" action leads to (nil at the end
	// of a pipeline).
	next *Table
}

// Next returns the table that follows this one in its pipeline.
func (t *Table) Next() *Table { return t.next }

// Pipeline is the layout of all tables the enabled features need.
type Pipeline struct {
	tables []*Table
	byName map[string]*Table
}

// buildPipeline assigns table numbers: table 0 is the root classifier, then the
// tables of each pipeline in pipeline order, within a pipeline by stage and,
// within a stage, in declaration order. A table needed by several features is
// placed once.
func buildPipeline(features ...Feature) (*Pipeline, error) {
	seen := map[*TableSpec]int{}
	var specs []*TableSpec
	for _, f := range features {
		for _, t := range f.Tables() {
			if _, ok := seen[t]; ok {
				continue
			}
			seen[t] = len(specs)
			specs = append(specs, t)
		}
	}
	sort.SliceStable(specs, func(i, j int) bool {
		a, b := specs[i], specs[j]
		if a.Pipeline != b.Pipeline {
			return a.Pipeline < b.Pipeline
		}
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		return seen[a] < seen[b]
	})
	if len(specs) == 0 || specs[0].Pipeline != PipelineRoot {
		return nil, fmt.Errorf("pipeline: the root classifier table is required")
	}
	if len(specs) > 254 {
		return nil, fmt.Errorf("pipeline: %d tables exceed OpenFlow's 254", len(specs))
	}
	p := &Pipeline{byName: map[string]*Table{}}
	for i, s := range specs {
		if _, dup := p.byName[s.Name]; dup {
			return nil, fmt.Errorf("pipeline: table %s declared twice", s.Name)
		}
		t := &Table{TableSpec: s, ID: uint8(i)}
		if i > 0 && specs[i-1].Pipeline == s.Pipeline {
			p.tables[i-1].next = t
		}
		p.tables = append(p.tables, t)
		p.byName[s.Name] = t
	}
	return p, nil
}

// Tables lists the tables in table-number order.
func (p *Pipeline) Tables() []*Table { return p.tables }

// Table returns the table of a spec; it panics if the spec was not enabled,
// which is a programming error caught by every test that builds the pipeline.
func (p *Pipeline) Table(s *TableSpec) *Table {
	t, ok := p.byName[s.Name]
	if !ok {
		panic("pipeline: table " + s.Name + " is not enabled")
	}
	return t
}

// Lookup returns the table of a name, for antctl and docs.
func (p *Pipeline) Lookup(name string) (*Table, bool) {
	t, ok := p.byName[name]
	return t, ok
}
