package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/flowaggregator"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestFlowAggregatorJoinsBothNodesRecordsOfATransfer: with `antrea-lab up
// --flow-visibility` (ANTREA_LAB_FLOW_VISIBILITY=1), a Pod on node 1 sends
// exactly N bytes over TCP to a Pod on node 2, directly and through a
// Service. `antctl get flows` must show the connection as records naming
// both Pods and Nodes, joined from the two agents' records (never one
// side alone), with the forward bytes the destination node counted N plus
// 40 to 80 bytes of IP and TCP headers per packet (the counts are IP bytes,
// as conntrack's; the source node's count includes retransmissions), and the
// Service's connection must carry the Service's port name. The delay from
// the end of each transfer to the first complete record in the aggregator
// is logged (the docs' figure), not asserted. Then a K8s NetworkPolicy
// admits the sink's traffic, and the records of a new connection name it as
// the ingress rule. The records carry both Pods' labels. Then an Antrea
// ClusterNetworkPolicy drops the client's connections to the sink (ingress,
// on the sink's node): `antctl get flows --denied` shows a denied record
// naming the policy and its rule, action drop; and one rejecting them on the
// client's way out (egress, on the client's node) shows one with action
// reject, released without waiting for the sink's node (which never sees
// the connection).
func TestFlowAggregatorJoinsBothNodesRecordsOfATransfer(t *testing.T) {
	e := requireReal(t)
	if !e.Opts.FlowVisibility {
		t.Skipf("the lab runs without the Flow Aggregator (set %s=1)", labtest.EnvFlowVisibility)
	}
	if len(e.Nodes) < 2 {
		t.Skip("needs two nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const n = 1_000_000
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		c := corev1.Container{Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent}
		node := e.Nodes[0]
		if name == "sink" {
			node = e.Nodes[1]
			c.Command = []string{"socat", "-u", "TCP-LISTEN:5201,reuseaddr,fork", "OPEN:/dev/null"}
			c.Ports = []corev1.ContainerPort{{ContainerPort: 5201}}
		} else {
			c.Args = []string{"pause"}
		}
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}}
	}, "client", "sink")
	for _, name := range []string{"sink", "client"} {
		p := pods[name]
		p.Labels["role"] = name
		if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := createService(t, ctx, e, ns, "sink", map[string]string{"role": "sink"}, corev1.ServicePort{
		Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 5201, TargetPort: intstr.FromInt32(5201)})

	send := func(to string, srcPort int) time.Time {
		t.Helper()
		labtest.WaitFor(t, ctx, fmt.Sprintf("%d bytes to %s", n, to), func() error {
			cmd := fmt.Sprintf("head -c %d /dev/zero | socat -u STDIN TCP:%s:5201,sourceport=%d,reuseaddr", n, to, srcPort)
			stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "sh", "-c", cmd)
			if err != nil {
				return fmt.Errorf("%s: %w\nstdout: %s\nstderr: %s", cmd, err, stdout, stderr)
			}
			return nil
		})
		return time.Now()
	}
	// complete waits for a record of the connection from srcPort whose
	// forward bytes reach n, and returns it and every record of the
	// connection the aggregator holds.
	complete := func(srcPort uint16) (flowaggregator.Flow, []flowaggregator.Flow) {
		t.Helper()
		var done flowaggregator.Flow
		var all []flowaggregator.Flow
		labtest.WaitFor(t, ctx, fmt.Sprintf("a complete record of port %d in antctl get flows", srcPort), func() error {
			out, stderr, err := antctl(ctx, e, "get", "flows", "-n", ns, "--pod", "client", "-o", "json")
			if err != nil {
				return fmt.Errorf("antctl get flows: %w: %s", err, stderr)
			}
			var fs []flowaggregator.Flow
			if err := json.Unmarshal([]byte(out), &fs); err != nil {
				return fmt.Errorf("antctl get flows -o json: %w: %s", err, out)
			}
			all = all[:0]
			for _, f := range fs {
				if f.SrcPort == srcPort && f.Protocol == 6 {
					all = append(all, f)
				}
			}
			for _, f := range all {
				if f.FromSource != nil && f.FromSource.Total.Bytes >= n {
					done = f
					return nil
				}
			}
			return fmt.Errorf("%d records of port %d, none with %d bytes yet", len(all), srcPort, n)
		})
		return done, all
	}
	check := func(f flowaggregator.Flow, all []flowaggregator.Flow, dstIP string) {
		t.Helper()
		if !f.Correlated || f.SrcPod != "client" || f.DstPod != "sink" || f.SrcNamespace != ns || f.DstNamespace != ns ||
			f.SrcNode != e.Nodes[0] || f.DstNode != e.Nodes[1] || f.FlowType != 2 {
			t.Errorf("record %+v: want one record joined from both nodes: %s/client on %s to %s/sink on %s, flowType 2",
				f, ns, e.Nodes[0], ns, e.Nodes[1])
		}
		if f.DstIP.String() != dstIP || f.DstPort != 5201 {
			t.Errorf("destination %s:%d, want the sink Pod %s:5201", f.DstIP, f.DstPort, dstIP)
		}
		// What the sink received, counted by its node: N plus 40 to 80
		// bytes of IP and TCP headers per packet. The source node counts
		// what the client sent, retransmissions included (the first
		// connection to a remote Pod may lose packets while the tunnel's
		// neighbour resolves), so at least that.
		d := f.FromDestination
		if d == nil || d.Total.Bytes < n+40*d.Total.Packets || d.Total.Bytes > n+80*d.Total.Packets {
			t.Errorf("destination node's counts %+v, want N=%d plus 40 to 80 bytes per packet", d, n)
		} else if c := f.FromSource; c.Total.Bytes < d.Total.Bytes || c.Total.Packets < d.Total.Packets {
			t.Errorf("source node: %d bytes in %d packets, fewer than the destination node's %d in %d",
				c.Total.Bytes, c.Total.Packets, d.Total.Bytes, d.Total.Packets)
		}
		t.Logf("bytes: source node %d in %d packets, destination node %d in %d (N=%d)", f.FromSource.Total.Bytes,
			f.FromSource.Total.Packets, f.FromDestination.Total.Bytes, f.FromDestination.Total.Packets, n)
		for _, r := range all {
			if !r.Correlated || r.SrcPod == "" || r.DstPod == "" {
				t.Errorf("a record of the connection names one side only: %+v", r)
			}
		}
		if f.SrcLabels["role"] != "client" || f.SrcLabels["app"] != "e2e" || f.DstLabels["role"] != "sink" {
			t.Errorf("labels %v and %v, want each Pod's (app=e2e, role=client / role=sink)", f.SrcLabels, f.DstLabels)
		}
	}

	t.Run("Pod to Pod on another node", func(t *testing.T) {
		ended := send(pods["sink"].Status.PodIP, 41001)
		f, all := complete(41001)
		check(f, all, pods["sink"].Status.PodIP)
		t.Logf("export delay: the complete record was in the aggregator %.1fs after the transfer ended (%d records of the connection)",
			f.Received.Sub(ended).Seconds(), len(all))
	})
	t.Run("through a Service the record names it", func(t *testing.T) {
		ended := send(svc.Spec.ClusterIP, 41002)
		f, all := complete(41002)
		check(f, all, pods["sink"].Status.PodIP)
		if want := ns + "/sink:tcp"; f.Service != want || f.ClusterIP.String() != svc.Spec.ClusterIP {
			t.Errorf("service %q at %s, want %s at %s", f.Service, f.ClusterIP, want, svc.Spec.ClusterIP)
		}
		t.Logf("export delay: %.1fs (Service)", f.Received.Sub(ended).Seconds())
	})
	t.Run("the NetworkPolicy rule that allowed the connection is named", func(t *testing.T) {
		port := intstr.FromInt32(5201)
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-client"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "sink"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "e2e"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Once the sink's node realized it, a new connection is admitted
		// by its rule; retried with a new source port until then.
		var f flowaggregator.Flow
		labtest.WaitFor(t, ctx, "a connection allowed by allow-client", func() error {
			src := 41100 + int(time.Now().UnixNano()%800)
			send(pods["sink"].Status.PodIP, src)
			rec, _ := complete(uint16(src))
			if rec.IngressPolicy != ns+"/allow-client" {
				return fmt.Errorf("port %d: ingress policy %q, want %s/allow-client", src, rec.IngressPolicy, ns)
			}
			f = rec
			return nil
		})
		// A K8s NetworkPolicy's rules have no names: upstream's record
		// leaves ingressNetworkPolicyRuleName empty for them too.
		if f.IngressPolicyType != 1 || f.IngressPolicyRule != "" {
			t.Errorf("ingress policy type %d rule %q, want 1 (K8s NetworkPolicy) and no rule name", f.IngressPolicyType, f.IngressPolicyRule)
		}
		out, _, err := antctl(ctx, e, "get", "flows", "--policy", "allow-client", "-o", "json")
		if err != nil || !strings.Contains(out, "allow-client") {
			t.Errorf("antctl get flows --policy allow-client: %v\n%s", err, out)
		}
	})

	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	// applyACNP creates a ClusterNetworkPolicy in the securityops tier and
	// waits until it is realized; it is deleted at the end of the test.
	applyACNP := func(t *testing.T, acnp *crdv1beta1.ClusterNetworkPolicy) func() {
		t.Helper()
		if _, err := crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, acnp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		del := func() {
			_ = crd.CrdV1beta1().ClusterNetworkPolicies().Delete(context.Background(), acnp.Name, metav1.DeleteOptions{})
		}
		t.Cleanup(del)
		labtest.WaitFor(t, ctx, "ClusterNetworkPolicy "+acnp.Name+" realized", func() error {
			p, err := crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, acnp.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != "Realized" || p.Status.ObservedGeneration != p.Generation {
				return fmt.Errorf("status %+v", p.Status)
			}
			return nil
		})
		return del
	}
	selectPod := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"role": name}}
	}
	inNS := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	// denied tries connections to the sink (each from a new source port,
	// refused or timing out) until antctl get flows --denied shows a
	// record of one that ok accepts, and returns it.
	denied := func(t *testing.T, what string, ok func(flowaggregator.Flow) error) flowaggregator.Flow {
		t.Helper()
		var got flowaggregator.Flow
		labtest.WaitFor(t, ctx, what, func() error {
			src := 42000 + int(time.Now().UnixNano()%1000)
			cmd := fmt.Sprintf("socat -u /dev/null TCP:%s:5201,sourceport=%d,reuseaddr,connect-timeout=2", pods["sink"].Status.PodIP, src)
			_, _, _ = e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "sh", "-c", cmd)
			var last error
			// A record waits for its partner at most correlationWait (10 s).
			for range 15 {
				out, stderr, err := antctl(ctx, e, "get", "flows", "-n", ns, "--denied", "-o", "json")
				if err != nil {
					return fmt.Errorf("antctl get flows --denied: %w: %s", err, stderr)
				}
				var fs []flowaggregator.Flow
				if err := json.Unmarshal([]byte(out), &fs); err != nil {
					return fmt.Errorf("antctl get flows --denied -o json: %w: %s", err, out)
				}
				last = fmt.Errorf("no denied record of source port %d", src)
				for _, f := range fs {
					if f.SrcPort != uint16(src) || f.Protocol != 6 {
						continue
					}
					if last = ok(f); last == nil {
						got = f
						return nil
					}
				}
				time.Sleep(time.Second)
			}
			return last
		})
		return got
	}

	t.Run("a connection an ACNP Drop rule denies is a denied record naming the rule", func(t *testing.T) {
		name := ns + "-drop-client"
		del := applyACNP(t, &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: crdv1beta1.ClusterNetworkPolicySpec{Tier: "securityops", Priority: 5,
				AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: selectPod("sink"), NamespaceSelector: inNS}},
				Ingress: []crdv1beta1.Rule{{Name: "drop-client", Action: ptrTo(crdv1beta1.RuleActionDrop),
					From: []crdv1beta1.NetworkPolicyPeer{{PodSelector: selectPod("client"), NamespaceSelector: inNS}}}}}})
		f := denied(t, "a denied record naming "+name+"/drop-client", func(f flowaggregator.Flow) error {
			if !f.Denied || f.IngressPolicy != name || f.IngressPolicyRule != "drop-client" || f.IngressPolicyAction != 2 ||
				f.IngressPolicyType != 3 || f.DstPod != "sink" || f.DstNode != e.Nodes[1] {
				return fmt.Errorf("record %+v: want denied by %s/drop-client (type 3, action 2) at the sink on %s", f, name, e.Nodes[1])
			}
			return nil
		})
		// The client's node committed the connection (its SYN left): its
		// record joins the sink node's denied one.
		t.Logf("denied record: correlated %v, source %s/%s on %s, %d packets, labels %v", f.Correlated, f.SrcNamespace, f.SrcPod,
			f.SrcNode, flowCountsOf(f).Total.Packets, f.DstLabels)
		if f.DstLabels["role"] != "sink" {
			t.Errorf("the denied record's destination labels %v, want role=sink", f.DstLabels)
		}
		out, _, err := antctl(ctx, e, "get", "flows", "-n", ns, "--denied")
		if err != nil || !strings.Contains(out, "ingress:DROP:"+name+"/drop-client") {
			t.Errorf("antctl get flows --denied (table) does not name the rule: %v\n%s", err, out)
		}
		t.Logf("antctl get flows -n %s --denied:\n%s", ns, out)
		del()
	})

	t.Run("a connection an ACNP Reject rule denies on its way out is a denied record of the source node alone", func(t *testing.T) {
		name := ns + "-reject-out"
		applyACNP(t, &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: crdv1beta1.ClusterNetworkPolicySpec{Tier: "securityops", Priority: 5,
				AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: selectPod("client"), NamespaceSelector: inNS}},
				Egress: []crdv1beta1.Rule{{Name: "no-sink", Action: ptrTo(crdv1beta1.RuleActionReject),
					To: []crdv1beta1.NetworkPolicyPeer{{PodSelector: selectPod("sink"), NamespaceSelector: inNS}}}}}})
		start := time.Now()
		f := denied(t, "a denied record naming "+name+"/no-sink", func(f flowaggregator.Flow) error {
			if !f.Denied || f.EgressPolicy != name || f.EgressPolicyRule != "no-sink" || f.EgressPolicyAction != 3 ||
				f.SrcPod != "client" || f.SrcNode != e.Nodes[0] || f.Correlated {
				return fmt.Errorf("record %+v: want denied by %s/no-sink (action 3) at the client on %s, not joined", f, name, e.Nodes[0])
			}
			return nil
		})
		t.Logf("egress denied record in the aggregator %.1fs after the first attempt began", f.Received.Sub(start).Seconds())
	})

	out, _, err := antctl(ctx, e, "get", "flows", "-n", ns)
	if err != nil || !strings.Contains(out, "inter-node") {
		t.Errorf("antctl get flows (table): %v\n%s", err, out)
	}
	t.Logf("antctl get flows -n %s:\n%s", ns, out)
}

func ptrTo[T any](v T) *T { return &v }

// flowCountsOf are the source node's counts, else the destination node's.
func flowCountsOf(f flowaggregator.Flow) flowaggregator.NodeCounts {
	if f.FromSource != nil {
		return *f.FromSource
	}
	if f.FromDestination != nil {
		return *f.FromDestination
	}
	return flowaggregator.NodeCounts{}
}

// EnvFlowFigures, when "1", runs TestFlowExportDelayFigures (the export
// delay figure of docs/flow-export.md; minutes); EnvFlowTimings "default"
// gives the agents the FlowExporter's default timings first (the lab's are
// shorter).
const (
	EnvFlowFigures = "ANTREA_LAB_FLOW_FIGURES"
	EnvFlowTimings = "ANTREA_LAB_FLOW_TIMINGS"
)

// useDefaultFlowTimings sets the agents' flowPollInterval,
// activeFlowExportTimeout and idleFlowExportTimeout to the defaults (5s, 5s,
// 15s) in antrea-config and restarts the agents (kubectl rollout restart),
// waiting until they run again and have had time to reach the aggregator.
func useDefaultFlowTimings(t *testing.T, ctx context.Context, e *labEnv) {
	t.Helper()
	cms := e.Client.CoreV1().ConfigMaps(lab.AntreaNamespace)
	cm, err := cms.Get(ctx, "antrea-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["antrea-agent.conf"]
	for k, v := range map[string]string{"flowPollInterval": "5s", "activeFlowExportTimeout": "5s", "idleFlowExportTimeout": "15s"} {
		conf = regexp.MustCompile(`(?m)^(\s*)`+k+`:.*$`).ReplaceAllString(conf, "${1}"+k+`: "`+v+`"`)
	}
	cm.Data["antrea-agent.conf"] = conf
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"rollout", "restart", "ds/antrea-agent"}, {"rollout", "status", "ds/antrea-agent", "--timeout=300s"}} {
		if out, stderr, err := e.Kubectl(ctx, append([]string{"-n", lab.AntreaNamespace}, args...)...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, stderr)
		}
	}
	// The exporters connect to the aggregator and send their first batch.
	time.Sleep(20 * time.Second)
	t.Logf("the agents run with the default timings (poll 5s, active 5s, idle 15s)")
}

// TestFlowExportDelayFigures measures the export delay over 25 connections
// (a Pod on node 1 sends 100,000 bytes to a Pod on node 2 from a fresh
// source port, one connection after the other): from the end of each
// transfer (the client's socat returned) to the first record at the Flow
// Aggregator (its received time; the lab's processes share this machine's
// clock) that counts every byte on the destination Node, and to its end of
// flow record (flowEndReason 3, once conntrack forgot the closed
// connection). It logs p50 and p99 of both; it asserts only that every
// connection got both records.
func TestFlowExportDelayFigures(t *testing.T) {
	e := requireReal(t)
	if !e.Opts.FlowVisibility || os.Getenv(EnvFlowFigures) != "1" {
		t.Skipf("set %s=1 and %s=1 (a lab with the Flow Aggregator)", labtest.EnvFlowVisibility, EnvFlowFigures)
	}
	if len(e.Nodes) < 2 {
		t.Skip("needs two nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if os.Getenv(EnvFlowTimings) == "default" {
		useDefaultFlowTimings(t, ctx, e)
	}
	const n, conns, firstPort = 100_000, 25, 43000
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		c := corev1.Container{Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent}
		node := e.Nodes[0]
		if name == "sink" {
			node = e.Nodes[1]
			c.Command = []string{"socat", "-u", "TCP-LISTEN:5201,reuseaddr,fork", "OPEN:/dev/null"}
		} else {
			c.Args = []string{"pause"}
		}
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}}
	}, "client", "sink")
	ended := map[uint16]time.Time{}
	for i := range conns {
		port := uint16(firstPort + i)
		cmd := fmt.Sprintf("head -c %d /dev/zero | socat -u STDIN TCP:%s:5201,sourceport=%d,reuseaddr", n, pods["sink"].Status.PodIP, port)
		if _, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "sh", "-c", cmd); err != nil {
			t.Fatalf("%s: %v: %s", cmd, err, stderr)
		}
		ended[port] = time.Now()
	}
	complete, final := map[uint16]time.Time{}, map[uint16]time.Time{}
	labtest.WaitFor(t, ctx, "every connection's complete and end-of-flow records", func() error {
		out, stderr, err := antctl(ctx, e, "get", "flows", "-n", ns, "-o", "json")
		if err != nil {
			return fmt.Errorf("antctl get flows: %w: %s", err, stderr)
		}
		var fs []flowaggregator.Flow
		if err := json.Unmarshal([]byte(out), &fs); err != nil {
			return err
		}
		for _, f := range fs {
			if _, ok := ended[f.SrcPort]; !ok || f.Protocol != 6 {
				continue
			}
			if d := f.FromDestination; d != nil && d.Total.Bytes >= n {
				if c, ok := complete[f.SrcPort]; !ok || f.Received.Before(c) {
					complete[f.SrcPort] = f.Received
				}
			}
			if f.EndReason == 3 {
				if c, ok := final[f.SrcPort]; !ok || f.Received.Before(c) {
					final[f.SrcPort] = f.Received
				}
			}
		}
		if len(complete) < conns || len(final) < conns {
			return fmt.Errorf("%d of %d connections with a complete record, %d with their end of flow", len(complete), conns, len(final))
		}
		return nil
	})
	for what, got := range map[string]map[uint16]time.Time{"the complete record": complete, "the end-of-flow record": final} {
		var ds []float64
		for p, at := range got {
			ds = append(ds, at.Sub(ended[p]).Seconds())
		}
		sort.Float64s(ds)
		pct := func(q float64) float64 { return ds[min(len(ds)-1, int(math.Ceil(q*float64(len(ds))))-1)] }
		t.Logf("export delay to %s over %d connections: p50 %.1fs, p99 %.1fs (min %.1fs, max %.1fs)", what, len(ds), pct(0.5), pct(0.99), ds[0], ds[len(ds)-1])
	}
}
