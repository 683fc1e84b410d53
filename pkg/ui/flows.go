package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/diagram"
	"antrea.io/antrea/pkg/flowaggregator"
)

// The Flows page: when the Flow Aggregator runs, a service map of who talks
// to whom from its latest records (GET /flows of its HTTP API), denied
// connections in red, and the newest records; otherwise how to turn it on.
// In the cluster the UI calls the aggregator's Service (port "api") by its
// ClusterIP, which needs no right beyond reading the Service; elsewhere
// --flow-aggregator-url names it.

// errNoAggregator: the aggregator's Service does not exist.
var errNoAggregator = errors.New("no Flow Aggregator Service")

// flowRecordLimit bounds the records one page view reads.
const flowRecordLimit = 2000

// serviceFlowGetter reads the aggregator's API at its Service's ClusterIP.
func serviceFlowGetter(kube kubernetes.Interface) query.FlowGetter {
	hc := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context, path string, params url.Values) ([]byte, error) {
		ns, name := query.FlowAggregatorNamespace, query.FlowAggregatorService
		svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, errNoAggregator
		}
		if err != nil {
			return nil, fmt.Errorf("service %s/%s: %w", ns, name, err)
		}
		var port int32
		for _, p := range svc.Spec.Ports {
			if p.Name == query.FlowAggregatorAPIPort {
				port = p.Port
			}
		}
		if port == 0 || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" {
			return nil, fmt.Errorf("service %s/%s has no ClusterIP or no port %q", ns, name, query.FlowAggregatorAPIPort)
		}
		base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port)))
		return httpFlowGet(ctx, hc, base, path, params)
	}
}

// urlFlowGetter reads the aggregator's API at base (--flow-aggregator-url).
func urlFlowGetter(base string) query.FlowGetter {
	hc := &http.Client{Timeout: 5 * time.Second}
	base = strings.TrimSuffix(base, "/")
	return func(ctx context.Context, path string, params url.Values) ([]byte, error) {
		return httpFlowGet(ctx, hc, base, path, params)
	}
}

func httpFlowGet(ctx context.Context, hc *http.Client, base, path string, params url.Values) ([]byte, error) {
	u := base + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the Flow Aggregator's API at %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("the Flow Aggregator's API at %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the Flow Aggregator's API at %s: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// FlowEdge is one arrow of the map, as the table under it lists it.
type FlowEdge struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Port        string `json:"port"`
	Connections int    `json:"connections"`
	Bytes       uint64 `json:"bytes"`
	Denied      bool   `json:"denied"`
	// Policies names the rules that allowed or denied it.
	Policies string `json:"policies,omitempty"`
}

// FlowRow is one record of the newest ones.
type FlowRow struct {
	Source      string    `json:"source"`
	Destination string    `json:"destination"`
	Protocol    string    `json:"protocol"`
	Service     string    `json:"service,omitempty"`
	Bytes       uint64    `json:"bytes"`
	Denied      bool      `json:"denied"`
	Policy      string    `json:"policy,omitempty"`
	End         time.Time `json:"end"`
}

// FlowsView is the Flows page.
type FlowsView struct {
	Available bool     `json:"available"`
	Message   string   `json:"message"`
	HowTo     []string `json:"howTo,omitempty"`
	// Records is how many records the map is drawn from.
	Records int        `json:"records"`
	Denied  int        `json:"denied"`
	Edges   []FlowEdge `json:"edges"`
	Recent  []FlowRow  `json:"recent"`
	SVG     string     `json:"svg,omitempty"`
}

// flowsHowTo says how to get a Flow Aggregator.
var flowsHowTo = []string{
	"Deploy the Flow Aggregator: kubectl apply -f build/yamls/flow-aggregator.yml (on the lab: antrea-lab up --flow-aggregator).",
	"Turn the agents' FlowExporter on, sending to it: featureGates.FlowExporter: true, flowExporter.enable: true and flowExporter.flowCollectorAddr: flow-aggregator/flow-aggregator:4739:tcp in antrea-agent.conf (Helm: --set featureGates.FlowExporter=true,flowExporter.enable=true).",
	"This page then maps who talks to whom from the aggregator's latest records, denied connections in red (docs/flow-export.md).",
}

func (s *Server) flows(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	get := s.cfg.FlowGetter
	if get == nil {
		get = serviceFlowGetter(sess.clients.Kube)
	}
	fs, err := query.Flows(r.Context(), get, query.FlowQuery{Limit: flowRecordLimit})
	switch {
	case errors.Is(err, errNoAggregator):
		writeJSON(w, http.StatusOK, FlowsView{Message: "No Flow Aggregator runs in this cluster (no Service " +
			query.FlowAggregatorNamespace + "/" + query.FlowAggregatorService + "), so there are no flows to map.",
			HowTo: flowsHowTo, Edges: []FlowEdge{}, Recent: []FlowRow{}})
		return
	case apierrors.IsForbidden(err):
		s.kubeError(w, sess, "reading the Flow Aggregator's Service", err)
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, flowsView(fs))
}

// flowsView builds the map from the records.
func flowsView(fs []flowaggregator.Flow) FlowsView {
	v := FlowsView{Available: true, Records: len(fs), Edges: []FlowEdge{}, Recent: []FlowRow{}}
	type key struct {
		from, to, port string
		denied         bool
	}
	type acc struct {
		FlowEdge
		policies map[string]bool
	}
	byKey := map[key]*acc{}
	var order []key
	// A connection sends a record every active timeout, each with its
	// totals: count it once, with its newest record's bytes.
	last := map[string]uint64{}
	connKey := map[string]key{}
	for _, f := range fs {
		from := workload(f.SrcNamespace, f.SrcPod, f.SrcIP.String())
		to := workload(f.DstNamespace, f.DstPod, f.DstIP.String())
		port := protoName(f.Protocol) + "/" + strconv.Itoa(int(f.DstPort))
		if f.Service != "" {
			port = "svc " + f.Service
		}
		k := key{from, to, port, f.Denied}
		a := byKey[k]
		if a == nil {
			a = &acc{FlowEdge: FlowEdge{From: from, To: to, Port: port, Denied: f.Denied}, policies: map[string]bool{}}
			byKey[k] = a
			order = append(order, k)
		}
		conn := fmt.Sprintf("%s:%d>%s:%d/%d@%d", f.SrcIP, f.SrcPort, f.DstIP, f.DstPort, f.Protocol, f.Start.UnixNano())
		if _, ok := connKey[conn]; !ok {
			a.Connections++
		}
		c := flowCounts(f)
		last[conn] = c.Total.Bytes + c.ReverseTotal.Bytes
		connKey[conn] = k
		for _, p := range []string{policyName(f.EgressPolicy, f.EgressPolicyRule), policyName(f.IngressPolicy, f.IngressPolicyRule)} {
			if p != "" {
				a.policies[p] = true
			}
		}
		if f.Denied {
			v.Denied++
		}
	}
	for conn, b := range last {
		byKey[connKey[conn]].Bytes += b
	}
	var mapEdges []diagram.MapEdge
	for _, k := range order {
		a := byKey[k]
		var ps []string
		for p := range a.policies {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		a.Policies = strings.Join(ps, ", ")
		v.Edges = append(v.Edges, a.FlowEdge)
		mapEdges = append(mapEdges, diagram.MapEdge{From: a.From, To: a.To, Port: a.Port, Connections: a.Connections, Bytes: a.Bytes, Denied: a.Denied})
	}
	sort.SliceStable(v.Edges, func(i, j int) bool {
		if v.Edges[i].Denied != v.Edges[j].Denied {
			return v.Edges[i].Denied
		}
		return v.Edges[i].Bytes > v.Edges[j].Bytes
	})
	for i := len(fs) - 1; i >= 0 && len(v.Recent) < 20; i-- {
		f := fs[i]
		c := flowCounts(f)
		pol := strings.Trim(policyName(f.EgressPolicy, f.EgressPolicyRule)+", "+policyName(f.IngressPolicy, f.IngressPolicyRule), ", ")
		v.Recent = append(v.Recent, FlowRow{Source: workload(f.SrcNamespace, f.SrcPod, f.SrcIP.String()) + ":" + strconv.Itoa(int(f.SrcPort)),
			Destination: workload(f.DstNamespace, f.DstPod, f.DstIP.String()) + ":" + strconv.Itoa(int(f.DstPort)),
			Protocol:    protoName(f.Protocol), Service: f.Service, Bytes: c.Total.Bytes + c.ReverseTotal.Bytes,
			Denied: f.Denied, Policy: pol, End: f.End})
	}
	switch {
	case len(fs) == 0:
		v.Message = "The Flow Aggregator runs but holds no record yet: connections show here seconds after they move."
	default:
		v.Message = fmt.Sprintf("%d records of %d connections between %d pairs; %d denied.", len(fs), len(last), len(v.Edges), v.Denied)
		v.SVG = diagram.ServiceMapSVG("Who talks to whom", mapEdges)
	}
	return v
}

// workload names one end: namespace/pod, else the address.
func workload(ns, pod, ip string) string {
	if pod == "" {
		return ip
	}
	return ns + "/" + pod
}

func policyName(p, rule string) string {
	if p == "" {
		return ""
	}
	if rule != "" {
		return p + " rule " + rule
	}
	return p
}

// flowCounts are the source node's counts, else the destination node's.
func flowCounts(f flowaggregator.Flow) flowaggregator.NodeCounts {
	switch {
	case f.FromSource != nil:
		return *f.FromSource
	case f.FromDestination != nil:
		return *f.FromDestination
	}
	return flowaggregator.NodeCounts{}
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	case 1, 58:
		return "ICMP"
	}
	return strconv.Itoa(int(p))
}
