package antctl

import (
	"encoding/xml"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	"antrea.io/antrea/pkg/diagram"
)

// crossNode is a Traceflow that crossed two Nodes: allowed by a policy on
// the sender, tunnelled, delivered on the receiver.
func crossNode() *crdv1beta1.Traceflow {
	return &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "client-to-web-1"},
		Spec: crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"},
			Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web-1"}},
		Status: crdv1beta1.TraceflowStatus{Phase: crdv1beta1.TraceflowSucceeded, Results: []crdv1beta1.NodeResult{
			{Node: "node-1", Role: crdv1beta1.RoleSender, Observations: []crdv1beta1.Observation{
				{Component: crdv1beta1.ComponentSpoofGuard, ComponentInfo: "SpoofGuard", Action: crdv1beta1.ActionForwarded},
				{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: "AntreaPolicyEgressRule", Action: crdv1beta1.ActionForwarded,
					NetworkPolicy: "AntreaClusterNetworkPolicy:allow-web", NetworkPolicyRule: "to-web"},
				{Component: crdv1beta1.ComponentForwarding, ComponentInfo: "Output", Action: crdv1beta1.ActionForwarded, TunnelDstIP: "172.30.0.12", TTL: 64},
			}},
			{Node: "node-2", Role: crdv1beta1.RoleReceiver, Observations: []crdv1beta1.Observation{
				{Component: crdv1beta1.ComponentForwarding, ComponentInfo: "Classifier", Action: crdv1beta1.ActionReceived},
				{Component: crdv1beta1.ComponentForwarding, ComponentInfo: "Output", Action: crdv1beta1.ActionDelivered, Pod: "demo/web-1", TTL: 63},
			}},
		}}}
}

// svgDoc is what the test reads back of the SVG.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Groups  []svgG   `xml:"g"`
}

type svgG struct {
	Class string    `xml:"class,attr"`
	ID    string    `xml:"id,attr"`
	From  string    `xml:"data-from,attr"`
	To    string    `xml:"data-to,attr"`
	Rects []svgRect `xml:"rect"`
	Texts []string  `xml:"text"`
}

type svgRect struct {
	Y      int `xml:"y,attr"`
	Height int `xml:"height,attr"`
}

func TestTraceflowSVGHasABoxPerObservationAndAnArrowBetweenEach(t *testing.T) {
	tf := crossNode()
	var doc svgDoc
	if err := xml.Unmarshal([]byte(diagram.TraceflowSVG(tf)), &doc); err != nil {
		t.Fatalf("the SVG is not XML: %v", err)
	}
	var boxes, edges, frames []svgG
	for _, g := range doc.Groups {
		switch {
		case strings.HasPrefix(g.Class, "box"):
			boxes = append(boxes, g)
		case g.Class == "edge":
			edges = append(edges, g)
		case g.Class == "node":
			frames = append(frames, g)
		}
	}
	// Expected from the observations: the source, then one box per observation.
	var want []string
	for _, r := range tf.Status.Results {
		for _, o := range r.Observations {
			want = append(want, string(o.Component)+": "+string(o.Action))
		}
	}
	if len(boxes) != 1+len(want) {
		t.Fatalf("%d boxes, want the source and %d observations", len(boxes), len(want))
	}
	if boxes[0].Texts[1] != "demo/client" {
		t.Errorf("first box %v, want the source Pod", boxes[0].Texts)
	}
	for i, w := range want {
		if boxes[i+1].Texts[0] != w {
			t.Errorf("box %d says %q, want %q", i+1, boxes[i+1].Texts[0], w)
		}
	}
	// Top to bottom, no overlap.
	for i := 1; i < len(boxes); i++ {
		prev, cur := boxes[i-1].Rects[0], boxes[i].Rects[0]
		if cur.Y <= prev.Y+prev.Height {
			t.Errorf("box %d (y %d) overlaps the one above (y %d, h %d)", i, cur.Y, prev.Y, prev.Height)
		}
	}
	if len(edges) != len(boxes)-1 {
		t.Fatalf("%d arrows for %d boxes", len(edges), len(boxes))
	}
	for i, e := range edges {
		if e.From != boxes[i].ID || e.To != boxes[i+1].ID {
			t.Errorf("arrow %d goes %s -> %s, want %s -> %s", i, e.From, e.To, boxes[i].ID, boxes[i+1].ID)
		}
	}
	// The arrow entering node-2 is the tunnel.
	if got := edges[3].Texts; len(got) != 1 || got[0] != "tunnel 172.30.0.12" {
		t.Errorf("arrow into node-2 labelled %v, want the tunnel destination", got)
	}
	if len(frames) != 2 || frames[0].Texts[0] != "node-1 (Sender)" || frames[1].Texts[0] != "node-2 (Receiver)" {
		t.Errorf("node frames %+v", frames)
	}
	if !strings.Contains(strings.Join(boxes[2].Texts, "|"), "policy AntreaClusterNetworkPolicy:allow-web rule to-web") {
		t.Errorf("the policy box does not name the policy and rule: %v", boxes[2].Texts)
	}
	if boxes[len(boxes)-1].Class != "box end" {
		t.Errorf("the delivered box is of class %q", boxes[len(boxes)-1].Class)
	}
}

var dotNode = regexp.MustCompile(`(?m)^\s+(\w+) \[label="([^"\\]*(?:\\.[^"\\]*)*)"`)
var dotEdge = regexp.MustCompile(`(?m)^\s+(\w+) -> (\w+)( \[label="([^"]*)"\])?;$`)

func TestTraceflowDOTMatchesTheObservations(t *testing.T) {
	tf := crossNode()
	dot := diagram.TraceflowDOT(tf)
	if !strings.HasPrefix(dot, "digraph traceflow {") || !strings.HasSuffix(dot, "}\n") {
		t.Fatalf("not a digraph:\n%s", dot)
	}
	labels := map[string]string{}
	for _, m := range dotNode.FindAllStringSubmatch(dot, -1) {
		labels[m[1]] = m[2]
	}
	if len(labels) != 6 {
		t.Fatalf("%d nodes, want the source and 5 observations:\n%s", len(labels), dot)
	}
	if !strings.HasPrefix(labels["n1_o1"], `Forwarding: Delivered\ntable Output\npod demo/web-1`) {
		t.Errorf("delivered node: %q", labels["n1_o1"])
	}
	edges := dotEdge.FindAllStringSubmatch(dot, -1)
	want := [][2]string{{"source", "n0_o0"}, {"n0_o0", "n0_o1"}, {"n0_o1", "n0_o2"}, {"n0_o2", "n1_o0"}, {"n1_o0", "n1_o1"}}
	if len(edges) != len(want) {
		t.Fatalf("edges %v, want %v", edges, want)
	}
	for i, e := range edges {
		if e[1] != want[i][0] || e[2] != want[i][1] {
			t.Errorf("edge %d %s -> %s, want %v", i, e[1], e[2], want[i])
		}
	}
	if edges[3][4] != "tunnel 172.30.0.12" {
		t.Errorf("tunnel edge label %q", edges[3][4])
	}
	if strings.Count(dot, "subgraph cluster_") != 2 {
		t.Errorf("want one cluster per Node:\n%s", dot)
	}
}

func TestParseFlow(t *testing.T) {
	p, v6, err := parseFlow("tcp,tcp_dst=80,tcp_flags=2,nw_ttl=9")
	if err != nil {
		t.Fatal(err)
	}
	if v6 || p.TransportHeader.TCP == nil || p.TransportHeader.TCP.DstPort != 80 || *p.TransportHeader.TCP.Flags != 2 ||
		p.IPHeader.Protocol != 6 || p.IPHeader.TTL != 9 {
		t.Fatalf("parsed %+v %+v (IPv6 %v)", p.IPHeader, p.TransportHeader.TCP, v6)
	}
	if p, _, err := parseFlow("udp_dst=53"); err != nil || p.TransportHeader.UDP.DstPort != 53 || p.IPHeader.Protocol != 17 {
		t.Fatalf("udp_dst=53: %+v %v", p, err)
	}
	// IPv6: the ipv6 keyword (upstream's) or a protocol as ovs-ofctl spells
	// IPv6's; the fields stay in ipHeader for NewTraceflow to move.
	for in, proto := range map[string]int32{"ipv6": 0, "ipv6,tcp,tcp_dst=80": 6, "udp6,udp_dst=53": 17, "icmp6,icmp_id=7": 1} {
		p, v6, err := parseFlow(in)
		if err != nil || !v6 || proto != 0 && p.IPHeader.Protocol != proto {
			t.Errorf("-f %s: %+v IPv6 %v (%v), want IPv6 of protocol %d", in, p, v6, err, proto)
		}
	}
	for in, want := range map[string]string{
		"tcp,tcp_dts=80": `unknown field "tcp_dts" (did you mean "tcp_dst"?)`,
		"tpc":            `unknown protocol "tpc" (did you mean "tcp"?)`,
		"tcp,udp":        "give one protocol",
		"tcp_dst=http":   `tcp_dst="http" is not a number`,
	} {
		if _, _, err := parseFlow(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-f %q: error %v, want %q", in, err, want)
		}
	}
}

// traceflowClients is a cluster with demo/client, demo/web-0 and Service
// demo/web whose Traceflows the fake "controller" finishes as they are
// created (with the given status).
func traceflowClients(status crdv1beta1.TraceflowStatus, created *[]*crdv1beta1.Traceflow) *Clients {
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		pod("demo", "client", "node-1", "10.10.1.3"), pod("demo", "web-0", "node-1", "10.10.1.2"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20"}})
	antrea := antreafake.NewSimpleClientset()
	antrea.PrependReactor("create", "traceflows", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tf := a.(k8stesting.CreateAction).GetObject().(*crdv1beta1.Traceflow)
		*created = append(*created, tf.DeepCopy())
		tf.Status = status
		return false, nil, nil
	})
	return &Clients{Kube: kube, Antrea: antrea}
}

func TestTraceflowCommandCreatesPrintsAndDeletes(t *testing.T) {
	var created []*crdv1beta1.Traceflow
	st := crossNode().Status
	cl := traceflowClients(st, &created)
	r := runAntctlWith(t, cl, "traceflow", "-S", "demo/client", "-D", "demo/web", "-f", "tcp,tcp_dst=8080")
	if r.runErr != nil {
		t.Fatalf("traceflow: %v\n%s", r.runErr, r.err)
	}
	if len(created) != 1 {
		t.Fatalf("%d Traceflows created", len(created))
	}
	spec := created[0].Spec
	if spec.Source.Pod != "client" || spec.Destination.Service != "web" || spec.Destination.Pod != "" ||
		spec.Packet.TransportHeader.TCP.DstPort != 8080 || spec.Timeout != 20 {
		t.Fatalf("created spec %+v", spec)
	}
	for _, want := range []string{"phase: Succeeded", "node-1 (Sender)", "node-2 (Receiver)",
		"policy AntreaClusterNetworkPolicy:allow-web rule to-web", "tunnel to 172.30.0.12", "Delivered", "pod demo/web-1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if l, _ := cl.Antrea.CrdV1beta1().Traceflows().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("the Traceflow was not deleted")
	}
	// --preserve keeps it; a Pod name as destination wins over a Service.
	r = runAntctlWith(t, cl, "traceflow", "-S", "demo/client", "-D", "demo/web-0", "--preserve", "-o", "yaml")
	if r.runErr != nil || !strings.Contains(r.out, "kind: Traceflow") && !strings.Contains(r.out, "phase: Succeeded") {
		t.Fatalf("-o yaml: %v\n%s", r.runErr, r.out)
	}
	if created[1].Spec.Destination.Pod != "web-0" {
		t.Errorf("destination %+v, want the Pod", created[1].Spec.Destination)
	}
	if l, _ := cl.Antrea.CrdV1beta1().Traceflows().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("--preserve: %d Traceflows left, want 1", len(l.Items))
	}
}

func TestTraceflowCommandBadInputIsOneLineNamingIt(t *testing.T) {
	var created []*crdv1beta1.Traceflow
	cl := traceflowClients(crdv1beta1.TraceflowStatus{}, &created)
	for args, want := range map[string]string{
		"-S demo/clinet -D demo/web-0":              `source Pod demo/clinet not found (did you mean "client"?)`,
		"-S dmeo/client -D demo/web-0":              `source Namespace dmeo not found (did you mean "demo"?)`,
		"-S demo/client -D demo/wbe-0":              `destination demo/wbe-0: no Pod or Service of that name (did you mean "web-0"?)`,
		"-S demo/client -D demo/web -o svgz":        `unknown output format "svgz" (did you mean "svg"?); want one of table, json, yaml, dot, svg`,
		"-S demo/client -D demo/web --dropped-only": "--dropped-only needs --live-traffic",
	} {
		r := runAntctlWith(t, cl, append([]string{"traceflow"}, strings.Fields(args)...)...)
		if r.runErr == nil || r.runErr.Error() != want {
			t.Errorf("antctl traceflow %s: error %v, want %q", args, r.runErr, want)
		}
	}
	if len(created) != 0 {
		t.Errorf("bad input created %d Traceflows", len(created))
	}
}

func TestTraceflowCommandFailedSaysWhy(t *testing.T) {
	var created []*crdv1beta1.Traceflow
	cl := traceflowClients(crdv1beta1.TraceflowStatus{Phase: crdv1beta1.TraceflowFailed,
		Reason: "Traceflow timed out after 20s: no Node reported the packet"}, &created)
	r := runAntctlWith(t, cl, "traceflow", "-S", "demo/client", "-D", "10.10.9.9")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), "timed out after 20s") || !strings.Contains(r.out, "phase: Failed") {
		t.Fatalf("failed Traceflow: %v\n%s", r.runErr, r.out)
	}
	if created[0].Spec.Destination.IP != "10.10.9.9" {
		t.Errorf("destination %+v", created[0].Spec.Destination)
	}
}

// dualStackClients is a dual-stack cluster (demo/client and demo/web-0 with
// an address of each family, Service demo/web with a ClusterIP of each)
// and an IPv4-only Pod demo/v4, whose Traceflows end as they are created.
func dualStackClients(created *[]*crdv1beta1.Traceflow) *Clients {
	dual := func(name, v4, v6 string) *corev1.Pod {
		p := pod("demo", name, "node-1", v4)
		p.Status.PodIPs = []corev1.PodIP{{IP: v4}, {IP: v6}}
		return p
	}
	kube := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		dual("client", "10.10.1.3", "fd00:10:244:1::3"), dual("web-0", "10.10.1.2", "fd00:10:244:1::2"), pod("demo", "v4", "node-1", "10.10.1.4"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20",
			ClusterIPs: []string{"10.96.0.20", "fd00:10:96::20"}}})
	antrea := antreafake.NewSimpleClientset()
	antrea.PrependReactor("create", "traceflows", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tf := a.(k8stesting.CreateAction).GetObject().(*crdv1beta1.Traceflow)
		*created = append(*created, tf.DeepCopy())
		tf.Status = crossNode().Status
		return false, nil, nil
	})
	return &Clients{Kube: kube, Antrea: antrea}
}

func TestTraceflowCommandTracesIPv6ToAnAddressOrWithIPv6(t *testing.T) {
	var created []*crdv1beta1.Traceflow
	cl := dualStackClients(&created)
	for _, tc := range []struct {
		args     string
		v6       bool
		next     int32 // 0: none given
		hopLimit int32
		header   string // the destination line antctl prints
	}{
		{"-S demo/client -D fd00::1", true, 0, 0, "destination: fd00::1\n"},
		{"-S demo/client -D fd00:10:96::20 -f udp,udp_dst=53,nw_ttl=9", true, 17, 9, "destination: fd00:10:96::20\n"},
		{"-S demo/client -D demo/web-0 -f ipv6", true, 0, 0, "destination: demo/web-0 (IPv6)\n"},
		{"-S demo/client -D demo/web -f ipv6,tcp,tcp_dst=80", true, 6, 0, "destination: demo/web (Service, IPv6)\n"},
		{"-S demo/client -D demo/web-0 -f icmp6", true, 58, 0, "destination: demo/web-0 (IPv6)\n"},
		{"-S demo/client -D demo/web-0 -f tcp,tcp_dst=80", false, 6, 0, "destination: demo/web-0\n"}, // dual-stack: IPv4 first
	} {
		r := runAntctlWith(t, cl, append([]string{"traceflow"}, strings.Fields(tc.args)...)...)
		if r.runErr != nil {
			t.Errorf("antctl traceflow %s: %v", tc.args, r.runErr)
			continue
		}
		p := created[len(created)-1].Spec.Packet
		if tc.v6 {
			h := p.IPv6Header
			if h == nil || p.IPHeader != nil || (tc.next == 0) != (h.NextHeader == nil) || h.NextHeader != nil && *h.NextHeader != tc.next ||
				h.HopLimit != tc.hopLimit {
				t.Errorf("antctl traceflow %s: packet %+v %+v, want ipv6Header{nextHeader %d, hopLimit %d} alone", tc.args, p.IPHeader, h, tc.next, tc.hopLimit)
			}
		} else if p.IPv6Header != nil || p.IPHeader == nil || p.IPHeader.Protocol != tc.next {
			t.Errorf("antctl traceflow %s: packet %+v %+v, want IPv4 of protocol %d", tc.args, p.IPHeader, p.IPv6Header, tc.next)
		}
		if !strings.Contains(r.out, tc.header) {
			t.Errorf("antctl traceflow %s printed no %q:\n%s", tc.args, tc.header, r.out)
		}
	}
	n := len(created)
	for args, want := range map[string]string{
		"-S demo/client -D 10.0.0.1 -f ipv6":                     "destination 10.0.0.1 is IPv4, but spec.packet.ipv6Header makes the packet IPv6",
		"-S demo/v4 -D fd00::1":                                  "source Pod demo/v4 has no IPv6 address (it has 10.10.1.4), but destination fd00::1 makes the packet IPv6",
		"-S demo/v4 -D demo/web-0 -f ipv6":                       "source Pod demo/v4 has no IPv6 address (it has 10.10.1.4), but spec.packet.ipv6Header makes the packet IPv6",
		"-S demo/client -D fd00::1 -f tcp,tcp_dst=80,nw_proto=6": "",
	} {
		r := runAntctlWith(t, cl, append([]string{"traceflow"}, strings.Fields(args)...)...)
		if want == "" {
			if r.runErr != nil {
				t.Errorf("antctl traceflow %s: %v", args, r.runErr)
			}
			n++
			continue
		}
		if r.runErr == nil || r.runErr.Error() != want {
			t.Errorf("antctl traceflow %s: error %v, want %q", args, r.runErr, want)
		}
	}
	if len(created) != n {
		t.Errorf("refused input created %d Traceflows", len(created)-n)
	}
}
