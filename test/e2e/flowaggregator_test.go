package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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
// the ingress rule.
func TestFlowAggregatorJoinsBothNodesRecordsOfATransfer(t *testing.T) {
	e := requireReal(t)
	if !e.Opts.FlowVisibility {
		t.Skipf("the lab runs without the Flow Aggregator (set %s=1)", labtest.EnvFlowVisibility)
	}
	if len(e.Nodes) < 2 {
		t.Skip("needs two nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	p := pods["sink"]
	p.Labels["role"] = "sink"
	if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
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
	out, _, err := antctl(ctx, e, "get", "flows", "-n", ns)
	if err != nil || !strings.Contains(out, "inter-node") {
		t.Errorf("antctl get flows (table): %v\n%s", err, out)
	}
	t.Logf("antctl get flows -n %s:\n%s", ns, out)
}
