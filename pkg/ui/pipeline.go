package ui

import (
	"net/http"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/diagram"
)

// The Pipeline page: the OVS pipeline pkg/agent/openflow declares, drawn
// by pkg/diagram as antctl get pipeline draws it, for the chosen Node: its
// flows with their packet counts and the edges they make, read from the
// Node's agent API (agentapi.go); when that API does not answer, the flow
// counts per table its agent reports in its AntreaAgentInfo, and a note
// saying why the packets are missing.

// PipelineView is the page.
type PipelineView struct {
	Nodes []string `json:"nodes"`
	Node  string   `json:"node,omitempty"`
	SVG   string   `json:"svg"`
	// Live: the counts come from the Node's flows (packets included).
	Live bool   `json:"live"`
	Note string `json:"note,omitempty"`
}

func (s *Server) pipeline(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	ctx := r.Context()
	agents, err := query.AgentInfos(ctx, sess.clients, "")
	if err != nil {
		s.kubeError(w, sess, "listing AntreaAgentInfos", err)
		return
	}
	out := PipelineView{Nodes: []string{}}
	want := r.URL.Query().Get("node")
	var flowTable map[string]int32
	for _, a := range agents {
		out.Nodes = append(out.Nodes, a.Name)
		if a.Name == want || want == "" && out.Node == "" {
			out.Node, flowTable = a.Name, a.OVSInfo.FlowTable
		}
	}
	if want != "" && out.Node != want {
		writeError(w, http.StatusNotFound, "no AntreaAgentInfo of node "+want+": its agent has not reported")
		return
	}
	var gr *diagram.Pipeline
	if out.Node != "" {
		stats, ferr := agentFlows(ctx, sess.cfg, sess.clients, out.Node)
		if ferr == nil {
			c, err := agentof.NewClient(nil, 0)
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			gr = diagram.LivePipeline(c.Pipeline(), "node "+out.Node, stats, nil)
			out.Live = true
			out.Note = "flows and matched packets per table from the agent API of node " + out.Node + " (/ovsflows, as antctl get pipeline --node); group bucket edges are not shown"
		} else {
			out.Note = "flow counts per table from the agent's AntreaAgentInfo; packet counts unavailable: " + ferr.Error()
		}
	}
	if gr == nil {
		gr, err = diagram.DeclaredPipeline()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if out.Node == "" {
			out.Note = "no agent has reported yet: the declared layout is shown"
		} else {
			gr = diagram.WithFlowCounts(gr, "node "+out.Node, flowTable)
		}
	}
	out.SVG = string(diagram.PipelineSVG(gr))
	writeJSON(w, http.StatusOK, out)
}
