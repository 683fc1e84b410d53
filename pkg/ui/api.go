package ui

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/diagram"
)

// The JSON API: one call per page, each answering what the page shows,
// computed here so the frontend only lays it out.

// StaleAfter is the heartbeat age past which a component shows red: three
// missed heartbeats of the agent's monitor (pkg/agent/monitor, 60 s).
const StaleAfter = 3 * time.Minute

// Condition is one health condition of a component.
type Condition struct {
	Type    string `json:"type"`
	OK      bool   `json:"ok"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Component is the controller or one agent, as the Summary shows it.
type Component struct {
	Name       string   `json:"name"`
	Node       string   `json:"node,omitempty"`
	Pod        string   `json:"pod,omitempty"`
	Version    string   `json:"version,omitempty"`
	OVSVersion string   `json:"ovsVersion,omitempty"`
	PodCount   int32    `json:"podCount"`
	Subnets    []string `json:"subnets,omitempty"`
	// Heartbeat is the last heartbeat; HeartbeatAge its age in seconds.
	Heartbeat    *time.Time `json:"heartbeat,omitempty"`
	HeartbeatAge int64      `json:"heartbeatAgeSeconds"`
	// Healthy: every condition OK and the heartbeat younger than StaleAfter.
	Healthy bool `json:"healthy"`
	// Problem says in words why it is not healthy.
	Problem    string      `json:"problem,omitempty"`
	Conditions []Condition `json:"conditions"`
	// Policies counts the computed NetworkPolicies it holds.
	Policies int32 `json:"networkPolicies"`
	// ConnectedAgents: the controller only.
	ConnectedAgents int32 `json:"connectedAgents,omitempty"`
	// Pending counts the policies of its Node's span whose current
	// generation its agent has not realized (agents only): its
	// realization lag, in policies.
	Pending *int `json:"pendingPolicies,omitempty"`
}

// Summary is the Summary page.
type Summary struct {
	Controller      *Component          `json:"controller,omitempty"`
	ControllerError string              `json:"controllerError,omitempty"`
	Agents          []Component         `json:"agents"`
	FeatureGates    []query.FeatureGate `json:"featureGates,omitempty"`
	FeatureGatesErr string              `json:"featureGatesError,omitempty"`
	// Policies and PendingPolicies: the computed policies, and those not
	// yet realized in their current generation on every Node of their span.
	Policies         int       `json:"policies"`
	PendingPolicies  int       `json:"pendingPolicies"`
	RealizationError string    `json:"realizationError,omitempty"`
	Time             time.Time `json:"time"`
	StaleAfter       int64     `json:"staleAfterSeconds"`
}

// health fills Healthy, Problem and HeartbeatAge from conditions and the
// newest heartbeat.
func (s *Server) health(c *Component, conds []Condition, beats []metav1.Time) {
	c.Conditions = conds
	var last time.Time
	for _, b := range beats {
		if b.After(last) {
			last = b.Time
		}
	}
	var problems []string
	if last.IsZero() {
		problems = append(problems, "no heartbeat")
	} else {
		t := last
		c.Heartbeat = &t
		age := s.now().Sub(last)
		c.HeartbeatAge = int64(age / time.Second)
		if age > StaleAfter {
			problems = append(problems, fmt.Sprintf("last heartbeat %s ago", age.Round(time.Second)))
		}
	}
	for _, cd := range conds {
		if !cd.OK {
			p := cd.Type + " is not True"
			if cd.Message != "" {
				p += ": " + cd.Message
			}
			problems = append(problems, p)
		}
	}
	c.Healthy = len(problems) == 0
	c.Problem = strings.Join(problems, "; ")
}

func (s *Server) summary(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	ctx := r.Context()
	out := Summary{Time: s.now(), StaleAfter: int64(StaleAfter / time.Second), Agents: []Component{}}
	agents, err := query.AgentInfos(ctx, sess.clients, "")
	if err != nil {
		s.kubeError(w, sess, "listing AntreaAgentInfos", err)
		return
	}
	for _, a := range agents {
		c := Component{Name: a.Name, Node: a.NodeRef.Name, Pod: a.PodRef.Namespace + "/" + a.PodRef.Name, Version: a.Version,
			OVSVersion: a.OVSInfo.Version, PodCount: a.LocalPodNum, Subnets: a.NodeSubnets,
			Policies: a.NetworkPolicyControllerInfo.NetworkPolicyNum}
		if a.PodRef.Name == "" {
			c.Pod = ""
		}
		var conds []Condition
		var beats []metav1.Time
		for _, cd := range a.AgentConditions {
			conds = append(conds, Condition{Type: string(cd.Type), OK: cd.Status == corev1.ConditionTrue, Reason: cd.Reason, Message: cd.Message})
			if cd.Type == crdv1beta1.AgentHealthy {
				beats = append(beats, cd.LastHeartbeatTime)
			}
		}
		s.health(&c, conds, beats)
		out.Agents = append(out.Agents, c)
	}
	ci, err := query.ControllerInfo(ctx, sess.clients)
	switch {
	case err == nil:
		c := Component{Name: ci.Name, Node: ci.NodeRef.Name, Pod: ci.PodRef.Namespace + "/" + ci.PodRef.Name, Version: ci.Version,
			Policies: ci.NetworkPolicyControllerInfo.NetworkPolicyNum, ConnectedAgents: ci.ConnectedAgentNum}
		var conds []Condition
		var beats []metav1.Time
		for _, cd := range ci.ControllerConditions {
			conds = append(conds, Condition{Type: string(cd.Type), OK: cd.Status == corev1.ConditionTrue, Reason: cd.Reason, Message: cd.Message})
			beats = append(beats, cd.LastHeartbeatTime)
		}
		s.health(&c, conds, beats)
		out.Controller = &c
	case apierrors.IsForbidden(err):
		s.kubeError(w, sess, "reading the AntreaControllerInfo", err)
		return
	default:
		out.ControllerError = err.Error()
	}
	if computed, err := readComputed(ctx, sess.clients); err != nil {
		out.RealizationError = "realization unavailable: " + apiMessage(err)
	} else {
		pending, total := pendingByNode(computed)
		out.Policies, out.PendingPolicies = len(computed), total
		for i := range out.Agents {
			n := pending[out.Agents[i].Node]
			out.Agents[i].Pending = &n
		}
	}
	if gates, err := query.ClusterFeatureGates(ctx, sess.clients); err != nil {
		out.FeatureGatesErr = err.Error()
	} else {
		out.FeatureGates = gates
	}
	writeJSON(w, http.StatusOK, out)
}

// Endpoint is a Pod or Service the Traceflow form offers.
type Endpoint struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	IP        string `json:"ip,omitempty"`
	Node      string `json:"node,omitempty"`
}

func (s *Server) endpoints(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	ctx := r.Context()
	pods, err := sess.clients.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing Pods", err)
		return
	}
	out := struct {
		Pods     []Endpoint `json:"pods"`
		Services []Endpoint `json:"services"`
	}{Pods: []Endpoint{}, Services: []Endpoint{}}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out.Pods = append(out.Pods, Endpoint{Namespace: p.Namespace, Name: p.Name, Kind: "Pod", IP: p.Status.PodIP, Node: p.Spec.NodeName})
	}
	svcs, err := sess.clients.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing Services", err)
		return
	}
	for _, sv := range svcs.Items {
		out.Services = append(out.Services, Endpoint{Namespace: sv.Namespace, Name: sv.Name, Kind: "Service", IP: sv.Spec.ClusterIP})
	}
	byName := func(e []Endpoint) func(i, j int) bool {
		return func(i, j int) bool { return e[i].Namespace+"/"+e[i].Name < e[j].Namespace+"/"+e[j].Name }
	}
	sort.Slice(out.Pods, byName(out.Pods))
	sort.Slice(out.Services, byName(out.Services))
	writeJSON(w, http.StatusOK, out)
}

// TraceflowRequest is the Traceflow form.
type TraceflowRequest struct {
	// Source is "namespace/pod", or an IP address for live traffic.
	Source string `json:"source"`
	// Destination is "namespace/pod", "namespace/service" or an IP address
	// (an IPv6 one makes the packet IPv6: query.NewTraceflow).
	Destination string `json:"destination"`
	// Protocol is TCP, UDP or ICMP (the default, an echo request); Port
	// the destination port.
	Protocol    string `json:"protocol"`
	Port        int32  `json:"port,omitempty"`
	LiveTraffic bool   `json:"liveTraffic,omitempty"`
	DroppedOnly bool   `json:"droppedOnly,omitempty"`
	// TimeoutSeconds bounds the trace (default 20).
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// TraceflowRow is one observation, as the table shows it.
type TraceflowRow struct {
	Node      string `json:"node"`
	Role      string `json:"role"`
	Component string `json:"component"`
	Table     string `json:"table,omitempty"`
	Action    string `json:"action"`
	Details   string `json:"details,omitempty"`
}

// TraceflowResult is what the page shows of a finished Traceflow.
type TraceflowResult struct {
	Name   string         `json:"name"`
	Phase  string         `json:"phase"`
	Reason string         `json:"reason,omitempty"`
	Rows   []TraceflowRow `json:"rows"`
	// Dropped names where the packet was dropped or rejected, and by
	// which policy rule, when it was.
	Dropped string `json:"dropped,omitempty"`
	// SVG is the path drawn by pkg/diagram, as antctl traceflow -o svg.
	SVG string `json:"svg"`
}

// traceflowResult summarizes a finished Traceflow.
func traceflowResult(tf *crdv1beta1.Traceflow) TraceflowResult {
	res := TraceflowResult{Name: tf.Name, Phase: string(tf.Status.Phase), Reason: tf.Status.Reason, Rows: []TraceflowRow{},
		SVG: diagram.TraceflowSVG(tf)}
	for _, nr := range tf.Status.Results {
		for _, o := range nr.Observations {
			res.Rows = append(res.Rows, TraceflowRow{Node: nr.Node, Role: string(nr.Role), Component: string(o.Component),
				Table: o.ComponentInfo, Action: string(o.Action), Details: diagram.ObservationDetails(o)})
			if (o.Action == crdv1beta1.ActionDropped || o.Action == crdv1beta1.ActionRejected) && res.Dropped == "" {
				res.Dropped = fmt.Sprintf("%s on node %s by %s", o.Action, nr.Node, o.Component)
				if o.NetworkPolicy != "" {
					res.Dropped += " rule " + o.NetworkPolicyRule + " of policy " + o.NetworkPolicy
					if o.NetworkPolicyRule == "" {
						res.Dropped = fmt.Sprintf("%s on node %s by policy %s", o.Action, nr.Node, o.NetworkPolicy)
					}
				}
			}
		}
	}
	return res
}

func splitRef(s string) (ns, name string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

// traceflowPoll is how often a running Traceflow is read.
const traceflowPoll = 500 * time.Millisecond

func (s *Server) traceflow(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	var req TraceflowRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.TimeoutSeconds <= 0 || req.TimeoutSeconds > 120 {
		req.TimeoutSeconds = 20
	}
	packet := crdv1beta1.Packet{}
	switch strings.ToUpper(req.Protocol) {
	case "TCP":
		syn := int32(2)
		packet.IPHeader = &crdv1beta1.IPHeader{Protocol: 6}
		packet.TransportHeader.TCP = &crdv1beta1.TCPHeader{DstPort: req.Port, Flags: &syn}
	case "UDP":
		packet.IPHeader = &crdv1beta1.IPHeader{Protocol: 17}
		packet.TransportHeader.UDP = &crdv1beta1.UDPHeader{DstPort: req.Port}
	case "", "ICMP":
		packet.IPHeader = &crdv1beta1.IPHeader{Protocol: 1}
		packet.TransportHeader.ICMP = &crdv1beta1.ICMPEchoRequestHeader{ID: 0, Sequence: 0}
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("protocol %q: want TCP, UDP or ICMP", req.Protocol))
		return
	}
	srcNS, src := splitRef(req.Source)
	dstNS, dst := splitRef(req.Destination)
	if src == "" || dst == "" {
		writeError(w, http.StatusBadRequest, "pick a source and a destination")
		return
	}
	qr := query.TraceflowRequest{SourceNamespace: srcNS, SourcePod: src, DestinationNamespace: dstNS, Destination: dst,
		Packet: packet, LiveTraffic: req.LiveTraffic, DroppedOnly: req.DroppedOnly,
		Timeout: time.Duration(req.TimeoutSeconds) * time.Second}
	tf, err := query.NewTraceflow(r.Context(), sess.clients, qr)
	if err != nil {
		if isAPIError(err) {
			s.kubeError(w, sess, "checking the Traceflow's endpoints", err)
		} else {
			writeError(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	klog.InfoS("Running a Traceflow", "traceflow", tf.Name, "source", req.Source, "destination", req.Destination)
	got, err := query.RunTraceflow(r.Context(), sess.clients, tf, traceflowPoll, false)
	if err != nil {
		if isAPIError(err) {
			s.kubeError(w, sess, "running Traceflow "+tf.Name, err)
			return
		}
		if got == nil {
			writeError(w, http.StatusGatewayTimeout, err.Error())
			return
		}
		res := traceflowResult(got)
		res.Reason = err.Error()
		writeJSON(w, http.StatusOK, res)
		return
	}
	writeJSON(w, http.StatusOK, traceflowResult(got))
}

func isAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}
