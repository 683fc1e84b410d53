package ui

import (
	"net/http"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/diagram"
)

// The Pipeline page: the OVS pipeline pkg/agent/openflow declares, drawn
// by pkg/diagram as antctl get pipeline --declared draws it, with each
// table's flow count on the chosen Node as its agent reports it in its
// AntreaAgentInfo. (Packet counts and the node's own edges need the agent
// API's flow dump: antctl get pipeline in the agent gives them.)

// PipelineView is the page.
type PipelineView struct {
	Nodes []string `json:"nodes"`
	Node  string   `json:"node,omitempty"`
	SVG   string   `json:"svg"`
	Note  string   `json:"note,omitempty"`
}

func (s *Server) pipeline(w http.ResponseWriter, r *http.Request, _ string, _ session) {
	agents, err := query.AgentInfos(r.Context(), s.clients, "")
	if err != nil {
		s.kubeError(w, "listing AntreaAgentInfos", err)
		return
	}
	gr, err := diagram.DeclaredPipeline()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := PipelineView{Nodes: []string{}}
	want := r.URL.Query().Get("node")
	for _, a := range agents {
		out.Nodes = append(out.Nodes, a.Name)
		if a.Name == want || want == "" && out.Node == "" {
			out.Node = a.Name
			gr = diagram.WithFlowCounts(gr, "node "+a.Name, a.OVSInfo.FlowTable)
		}
	}
	switch {
	case want != "" && out.Node != want:
		writeError(w, http.StatusNotFound, "no AntreaAgentInfo of node "+want+": its agent has not reported")
		return
	case out.Node == "":
		out.Note = "no agent has reported yet: the declared layout is shown"
	default:
		out.Note = "flow counts per table from the agent's AntreaAgentInfo; packet counts: antctl get pipeline inside the agent"
	}
	out.SVG = string(diagram.PipelineSVG(gr))
	writeJSON(w, http.StatusOK, out)
}

// FlowsView is the Flows page.
type FlowsView struct {
	Available bool     `json:"available"`
	Message   string   `json:"message"`
	HowTo     []string `json:"howTo"`
}

func (s *Server) flows(w http.ResponseWriter, _ *http.Request, _ string, _ session) {
	writeJSON(w, http.StatusOK, FlowsView{Available: false,
		Message: "No Flow Aggregator runs in this cluster: this Antrea does not have one yet, so there are no flows to map.",
		HowTo: []string{
			"The agents' FlowExporter reads connections from OVS conntrack: set featureGates.FlowExporter: true and flowExporter.enable: true in antrea-agent.conf (Helm: --set featureGates.FlowExporter=true,flowExporter.enable=true).",
			"The Flow Aggregator (a Deployment collecting the agents' records, upstream's flow-aggregator) is planned; once it runs, this page shows the service map of who talks to whom, denied connections in red.",
			"Meanwhile: the Policies page's per-rule counts, and Traceflow for one connection.",
		}})
}
