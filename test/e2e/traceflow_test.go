package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// tfLab is the world of TestTraceflow: a Namespace with an agnhost client
// and server web-0 on the first node, server web-1 on the second, and the
// Service web in front of web-1 only (so the endpoint the load balancer
// picks is known).
type tfLab struct {
	e      *labEnv
	ctx    context.Context
	ns     string
	pods   map[string]*corev1.Pod
	nodeIP map[string]string
	crd    versioned.Interface
}

// tfAntctl runs bin/antctl against the lab as a user does.
func tfAntctl(ctx context.Context, e *labEnv, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antctl"), append([]string{"--kubeconfig", e.Opts.KubeconfigPath()}, args...)...)
	var o, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &errb
	err = cmd.Run()
	return o.String(), errb.String(), err
}

func newTFLab(t *testing.T, e *labEnv, ctx context.Context) *tfLab {
	t.Helper()
	run := strconv.FormatInt(time.Now().UnixNano()%1000000, 10)
	l := &tfLab{e: e, ctx: ctx, ns: "tf-" + run, pods: map[string]*corev1.Pod{}, nodeIP: map[string]string{}}
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	l.crd = crd
	if err := labtest.CreateNamespace(ctx, e.Client, l.ns, map[string]string{"tf-e2e": run}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), l.ns, metav1.DeleteOptions{}) })
	place := map[string]string{"client": e.Nodes[0], "web-0": e.Nodes[0], "web-1": e.Nodes[1]}
	var names []string
	for name, node := range place {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
				Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"netexec", "--http-port=80", "--udp-port=80"}}}},
		}
		if _, err := e.Client.CoreV1().Pods(l.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if _, err := e.Client.CoreV1().Services(l.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"pod": "web-1"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(80)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := labtest.WaitPodsUsable(ctx, e.Client, l.ns, names)
	if err != nil {
		t.Fatal(err)
	}
	l.pods = got
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				l.nodeIP[n.Name] = a.Address
			}
		}
	}
	return l
}

func (l *tfLab) ip(pod string) string { return l.pods[pod].Status.PodIP }

// trace runs antctl traceflow -o json and returns the finished Traceflow.
func (l *tfLab) trace(t *testing.T, args ...string) *crdv1beta1.Traceflow {
	t.Helper()
	out, errOut, err := tfAntctl(l.ctx, l.e, append([]string{"traceflow", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("antctl traceflow %v: %v\n%s\n%s", args, err, errOut, out)
	}
	var tf crdv1beta1.Traceflow
	if err := json.Unmarshal([]byte(out), &tf); err != nil {
		t.Fatalf("antctl traceflow -o json: %v\n%s", err, out)
	}
	return &tf
}

// show runs antctl traceflow as a user reads it and logs the output (the
// user guide, docs/traceflow.md, quotes these logs).
func (l *tfLab) show(t *testing.T, args ...string) {
	t.Helper()
	out, errOut, err := tfAntctl(l.ctx, l.e, append([]string{"traceflow"}, args...)...)
	t.Logf("$ antctl traceflow %s\n%s%s", strings.Join(args, " "), out, errOut)
	if err != nil {
		t.Errorf("antctl traceflow %v: %v", args, err)
	}
}

// obs is an observation reduced to what a test compares.
func obsLine(o crdv1beta1.Observation) string {
	s := string(o.Component) + " " + string(o.Action)
	for _, kv := range [][2]string{{"pod", o.Pod}, {"tunnel", o.TunnelDstIP}, {"endpoint", o.TranslatedDstIP},
		{"policy", o.NetworkPolicy}, {"rule", o.NetworkPolicyRule}} {
		if kv[1] != "" {
			s += " " + kv[0] + "=" + kv[1]
		}
	}
	return s
}

func resultOf(tf *crdv1beta1.Traceflow, node string) (crdv1beta1.NodeResult, bool) {
	for _, r := range tf.Status.Results {
		if r.Node == node {
			return r, true
		}
	}
	return crdv1beta1.NodeResult{}, false
}

// expectPath checks one node's observations (in order, each line a prefix
// of obsLine: the policy tables a packet meets vary with the policies of
// the whole cluster, so NetworkPolicy Forwarded lines are skipped).
func expectPath(t *testing.T, tf *crdv1beta1.Traceflow, node, role string, want ...string) {
	t.Helper()
	r, ok := resultOf(tf, node)
	if !ok {
		t.Fatalf("no result from %s: %+v", node, tf.Status)
	}
	var got []string
	for _, o := range r.Observations {
		if o.Component == crdv1beta1.ComponentNetworkPolicy && o.Action == crdv1beta1.ActionForwarded {
			continue
		}
		got = append(got, obsLine(o))
	}
	if r.Role != role || strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("%s (%s):\n got  %s\n want %s (%s)", node, r.Role, strings.Join(got, " | "), strings.Join(want, " | "), role)
	}
}

// TestTraceflow traces packets on the real lab with antctl traceflow.
// Expectations follow upstream Antrea's Traceflow user guide: the sender
// reports SpoofGuard, the load balancer's endpoint for a Service, the
// tunnel it forwards into; the receiver reports Received and Delivered; a
// policy drop names the policy and the rule.
func TestTraceflow(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := newTFLab(t, e, ctx)
	n0, n1 := e.Nodes[0], e.Nodes[1]
	src := l.ns + "/client"

	t.Run("pod to pod on one node is delivered", func(t *testing.T) {
		tf := l.trace(t, "-S", src, "-D", l.ns+"/web-0")
		if tf.Status.Phase != crdv1beta1.TraceflowSucceeded || len(tf.Status.Results) != 1 {
			t.Fatalf("status %+v", tf.Status)
		}
		expectPath(t, tf, n0, crdv1beta1.RoleSender, "SpoofGuard Forwarded", "Forwarding Delivered pod="+l.ns+"/web-0")
	})

	t.Run("pod to pod across nodes is forwarded into the tunnel, then received and delivered", func(t *testing.T) {
		tf := l.trace(t, "-S", src, "-D", l.ns+"/web-1", "-f", "tcp,tcp_dst=80")
		if tf.Status.Phase != crdv1beta1.TraceflowSucceeded {
			t.Fatalf("status %+v", tf.Status)
		}
		expectPath(t, tf, n0, crdv1beta1.RoleSender, "SpoofGuard Forwarded", "Forwarding Forwarded tunnel="+l.nodeIP[n1])
		expectPath(t, tf, n1, crdv1beta1.RoleReceiver, "Forwarding Received", "Forwarding Delivered pod="+l.ns+"/web-1")
		l.show(t, "-S", src, "-D", l.ns+"/web-1", "-f", "tcp,tcp_dst=80")
		// Each node routes the packet (docs/design/ovs-pipeline.md, L3DecTTL):
		// two hops, as through two routers.
		if r, _ := resultOf(tf, n1); r.Observations[len(r.Observations)-1].TTL != 62 {
			t.Errorf("delivered with TTL %d, want 62 (two routed hops)", r.Observations[len(r.Observations)-1].TTL)
		}
	})

	t.Run("pod to Service: the load balancer's endpoint, then the endpoint's node", func(t *testing.T) {
		tf := l.trace(t, "-S", src, "-D", l.ns+"/web")
		if tf.Spec.Destination.Service != "web" || tf.Status.Phase != crdv1beta1.TraceflowSucceeded {
			t.Fatalf("spec %+v status %+v", tf.Spec.Destination, tf.Status)
		}
		expectPath(t, tf, n0, crdv1beta1.RoleSender, "SpoofGuard Forwarded", "LB Forwarded endpoint="+l.ip("web-1"),
			"Forwarding Forwarded tunnel="+l.nodeIP[n1])
		expectPath(t, tf, n1, crdv1beta1.RoleReceiver, "Forwarding Received", "Forwarding Delivered pod="+l.ns+"/web-1")
		l.show(t, "-S", src, "-D", l.ns+"/web")
	})

	t.Run("dropped across nodes by an Antrea ClusterNetworkPolicy names the policy and rule", func(t *testing.T) {
		name := l.ns + "-deny-client"
		acnp := &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.ClusterNetworkPolicySpec{
			Tier: "securityops", Priority: 5,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "web-1"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": l.ns}}}},
			Ingress: []crdv1beta1.Rule{{Name: "drop-client", Action: tfPtr(crdv1beta1.RuleActionDrop), From: []crdv1beta1.NetworkPolicyPeer{{
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "client"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": l.ns}}}}}},
		}}
		if _, err := l.crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, acnp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = l.crd.CrdV1beta1().ClusterNetworkPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
		}()
		tfWaitRealized(t, ctx, func() (bool, error) {
			p, err := l.crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == "Realized" && p.Status.ObservedGeneration == p.Generation, err
		})
		tf := l.trace(t, "-S", src, "-D", l.ns+"/web-1", "-f", "tcp,tcp_dst=80")
		expectPath(t, tf, n0, crdv1beta1.RoleSender, "SpoofGuard Forwarded", "Forwarding Forwarded tunnel="+l.nodeIP[n1])
		expectPath(t, tf, n1, crdv1beta1.RoleReceiver, "Forwarding Received",
			"NetworkPolicy Dropped policy=AntreaClusterNetworkPolicy:"+name+" rule=drop-client")
		l.show(t, "-S", src, "-D", l.ns+"/web-1", "-f", "tcp,tcp_dst=80")
	})

	t.Run("dropped across nodes by K8s NetworkPolicy isolation names the policy", func(t *testing.T) {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "only-web-0"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "web-1"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "web-0"}}}}}},
		}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(l.ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := false
		defer func() {
			if !deleted {
				_ = e.Client.NetworkingV1().NetworkPolicies(l.ns).Delete(context.Background(), np.Name, metav1.DeleteOptions{})
			}
		}()
		// Realization of a K8s NetworkPolicy is not in its status: retry
		// the trace until the drop shows (or fail with the last result).
		var tf *crdv1beta1.Traceflow
		for i := 0; i < 20; i++ {
			tf = l.trace(t, "-S", src, "-D", l.ns+"/web-1")
			// (the ClusterNetworkPolicy of the case before may still drop it
			// for a moment after its deletion)
			if r, ok := resultOf(tf, n1); ok && len(r.Observations) > 0 &&
				strings.HasPrefix(r.Observations[len(r.Observations)-1].NetworkPolicy, "K8sNetworkPolicy:") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		expectPath(t, tf, n1, crdv1beta1.RoleReceiver, "Forwarding Received",
			"NetworkPolicy Dropped policy=K8sNetworkPolicy:"+l.ns+"/only-web-0")
		// Once the policy is gone the packet is delivered again.
		if err := e.Client.NetworkingV1().NetworkPolicies(l.ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = true
		for i := 0; i < 20; i++ {
			tf = l.trace(t, "-S", src, "-D", l.ns+"/web-1")
			if r, ok := resultOf(tf, n1); ok && len(r.Observations) > 0 &&
				r.Observations[len(r.Observations)-1].Action == crdv1beta1.ActionDelivered {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		expectPath(t, tf, n1, crdv1beta1.RoleReceiver, "Forwarding Received", "Forwarding Delivered pod="+l.ns+"/web-1")
	})

	t.Run("-o svg draws the path and -o dot writes a digraph", func(t *testing.T) {
		out, errOut, err := tfAntctl(ctx, e, "traceflow", "-S", src, "-D", l.ns+"/web-1", "-o", "svg")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		var doc struct {
			XMLName xml.Name `xml:"svg"`
			Groups  []struct {
				Class string   `xml:"class,attr"`
				Texts []string `xml:"text"`
			} `xml:"g"`
		}
		if err := xml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("-o svg is not XML: %v\n%s", err, out)
		}
		var titles []string
		for _, g := range doc.Groups {
			if strings.HasPrefix(g.Class, "box") {
				titles = append(titles, g.Texts[0])
			}
		}
		want := "Source | SpoofGuard: Forwarded | Forwarding: Forwarded | Forwarding: Received | Forwarding: Delivered"
		if strings.Join(titles, " | ") != want {
			t.Errorf("SVG boxes %q, want %q", strings.Join(titles, " | "), want)
		}
		if err := os.WriteFile(filepath.Join(t.TempDir(), "path.svg"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		dot, errOut, err := tfAntctl(ctx, e, "traceflow", "-S", src, "-D", l.ns+"/web-0", "-o", "dot")
		if err != nil || !strings.HasPrefix(dot, "digraph traceflow {") || !strings.Contains(dot, "source -> n0_o0") {
			t.Fatalf("-o dot: %v %s\n%s", err, errOut, dot)
		}
	})

	t.Run("an unknown pod is one line naming it with the closest name", func(t *testing.T) {
		_, errOut, err := tfAntctl(ctx, e, "traceflow", "-S", l.ns+"/clinet", "-D", l.ns+"/web-0")
		want := fmt.Sprintf("antctl: source Pod %s/clinet not found (did you mean \"client\"?)\n", l.ns)
		if err == nil || errOut != want {
			t.Fatalf("stderr %q (%v), want %q", errOut, err, want)
		}
		t.Logf("$ antctl traceflow -S %s/clinet -D %s/web-0\n%s", l.ns, l.ns, errOut)
	})

	t.Run("latency from create to Succeeded", func(t *testing.T) {
		var lat []time.Duration
		for i := 0; i < 10; i++ {
			lat = append(lat, l.measure(t, fmt.Sprintf("%s-lat-%d", l.ns, i)))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("traceflow latency (create -> Succeeded, client on %s -> web-1 on %s, %d runs): p50 %v, min %v, max %v",
			n0, n1, len(lat), lat[len(lat)/2], lat[0], lat[len(lat)-1])
	})

	t.Run("no Traceflow is left and no node keeps Traceflow flows", func(t *testing.T) {
		list, err := l.crd.CrdV1beta1().Traceflows().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tf := range list.Items {
			if strings.HasPrefix(tf.Name, "client-to-") || strings.HasPrefix(tf.Name, l.ns) {
				t.Errorf("Traceflow %s left behind", tf.Name)
			}
		}
		for _, node := range e.Nodes {
			labtest.WaitFor(t, ctx, "the Traceflow flows of "+node+" to go", func() error {
				out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket(node)).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				for _, line := range strings.Split(string(out), "\n") {
					if tfCookie.MatchString(line) {
						return fmt.Errorf("left: %s", line)
					}
				}
				return nil
			})
		}
	})
}

func tfPtr[T any](v T) *T { return &v }

// tfCookie matches the cookie of a Traceflow tag's flows (round, 0x7f0000,
// tag: pkg/agent/openflow/traceflow.go).
var tfCookie = regexp.MustCompile(`cookie=0x[0-9a-f]*7f0000[0-9a-f]{2},`)

func tfWaitRealized(t *testing.T, ctx context.Context, ok func() (bool, error)) {
	t.Helper()
	labtest.WaitFor(t, ctx, "the policy to be realized", func() error {
		done, err := ok()
		if err != nil {
			return err
		}
		if !done {
			return fmt.Errorf("not realized yet")
		}
		return nil
	})
}

// measure creates a Traceflow across nodes and times it from the create
// call to the watch event that shows it Succeeded.
func (l *tfLab) measure(t *testing.T, name string) time.Duration {
	t.Helper()
	tfs := l.crd.CrdV1beta1().Traceflows()
	w, err := tfs.Watch(l.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	defer func() { _ = tfs.Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	tf := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TraceflowSpec{
		Source:      crdv1beta1.Source{Namespace: l.ns, Pod: "client"},
		Destination: crdv1beta1.Destination{Namespace: l.ns, Pod: "web-1"}}}
	start := time.Now()
	if _, err := tfs.Create(l.ctx, tf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			t.Fatalf("watch: %+v", ev.Object)
		}
		got, ok := ev.Object.(*crdv1beta1.Traceflow)
		if !ok {
			continue
		}
		switch got.Status.Phase {
		case crdv1beta1.TraceflowSucceeded:
			return time.Since(start)
		case crdv1beta1.TraceflowFailed:
			t.Fatalf("Traceflow %s failed: %s", name, got.Status.Reason)
		}
	}
	t.Fatalf("watch of %s ended before it finished", name)
	return 0
}
