package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/supportbundle"
	"antrea.io/antrea/test/labtest"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// antctl runs bin/antctl (the binary make build put there, which the lab's
// agent image also carries) against the lab, as a user on a laptop does.
func antctl(ctx context.Context, e *labEnv, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antctl"), append([]string{"--kubeconfig", e.Opts.KubeconfigPath()}, args...)...)
	var o, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &errb
	err = cmd.Run()
	return o.String(), errb.String(), err
}

type antctlCheck struct {
	Node, Check, Verdict, Detail, Fix string
}

// TestAntctlCheckCluster: the preflight on every lab node. The lab runs OVS's
// userspace datapath (docs/lab.md: no openvswitch kernel module), so the
// expectations are those of netdev: OVS answers with its version, no module
// is needed, the tunnel is encapsulated in userspace; nothing fails. The
// checker DaemonSet is gone afterwards.
func TestAntctlCheckCluster(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, errOut, err := antctl(ctx, e, "check", "cluster", "-o", "json")
	if err != nil {
		t.Fatalf("antctl check cluster: %v\n%s\n%s", err, out, errOut)
	}
	var rs []antctlCheck
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	byNode := map[string]map[string]antctlCheck{}
	for _, r := range rs {
		if byNode[r.Node] == nil {
			byNode[r.Node] = map[string]antctlCheck{}
		}
		byNode[r.Node][r.Check] = r
	}
	for _, n := range e.Nodes {
		checks := byNode[n]
		for _, c := range []string{"ovs", "datapath", "tunnel-geneve", "tunnel-vxlan", "tunnel-gre", "conntrack"} {
			if checks[c].Verdict != "PASS" {
				t.Errorf("%s: check %s is %q (%s), want PASS", n, c, checks[c].Verdict, checks[c].Detail)
			}
		}
		if !strings.Contains(checks["ovs"].Detail, "Open vSwitch ") {
			t.Errorf("%s: the ovs check does not name the version: %s", n, checks["ovs"].Detail)
		}
		if !strings.Contains(checks["datapath"].Detail, "netdev") {
			t.Errorf("%s: the datapath check does not name netdev: %s", n, checks["datapath"].Detail)
		}
	}
	ds, err := e.Client.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "antctl-check"})
	if err != nil || len(ds.Items) != 0 {
		t.Errorf("checker DaemonSets left: %v %v", err, ds)
	}
}

// TestAntctlCheckInstallation deploys its test pods and checks pod to pod
// on one node and across nodes, the Service, DNS and a NetworkPolicy; every
// check passes on a working lab, and the test Namespace is deleted.
func TestAntctlCheckInstallation(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	out, errOut, err := antctl(ctx, e, "check", "installation", "-o", "json")
	if err != nil {
		t.Fatalf("antctl check installation: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("check installation took %s", time.Since(start).Round(time.Millisecond))
	var rs []antctlCheck
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []string{"encryption", "pod-to-pod (same node)", "pod-to-pod (across nodes)", "pod-to-Service", "DNS", "networkpolicy-deny", "networkpolicy-allow"}
	if len(rs) != len(want) {
		t.Fatalf("checks %v, want %v", rs, want)
	}
	for i, r := range rs {
		// The encryption check passes where the lab runs WireGuard and is
		// skipped, saying so, where it runs none.
		verdict := "PASS"
		if r.Check == "encryption" && e.Opts.Encryption != "wireguard" {
			verdict = "SKIP"
		}
		if r.Check != want[i] || r.Verdict != verdict {
			t.Errorf("check %d: %s %s (%s), want %s %s", i, r.Check, r.Verdict, r.Detail, want[i], verdict)
		}
	}
	ns := ""
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "Deploying the test pods in Namespace ") {
			ns = strings.TrimSuffix(strings.TrimPrefix(l, "Deploying the test pods in Namespace "), "...")
		}
	}
	if ns == "" {
		t.Fatalf("antctl did not name its Namespace: %s", errOut)
	}
	// Deleted means gone or going (the Namespace finalizes its pods).
	got, err := e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil && got.DeletionTimestamp == nil {
		t.Errorf("Namespace %s is still there and not being deleted", ns)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// TestAntctlSupportBundle collects the controller and both agents: each
// agent's bundle holds its bridge's flows (as many as ovs-ofctl dumps),
// groups, OVSDB dump, network state and profiles; no bundle holds the
// admin kubeconfig's client key or an agent's ServiceAccount token.
func TestAntctlSupportBundle(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	out, errOut, err := antctl(ctx, e, "supportbundle", "--dir", dir)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("antctl supportbundle: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("supportbundle of the controller and %d agents in %s:\n%s", len(e.Nodes), took.Round(time.Millisecond), out)
	// Secrets the bundles must not hold.
	kc, err := os.ReadFile(e.Opts.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, l := range strings.Split(string(kc), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ": "); ok && (k == "client-key-data" || k == "token") {
			secrets = append(secrets, v)
		}
	}
	var total int64
	for _, n := range e.Nodes {
		file := filepath.Join(dir, "agent-"+n+".tar.gz")
		st, err := os.Stat(file)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		total += st.Size()
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := supportbundle.Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		dump, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket(n)).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Count(string(dump), "\n") - 1 // the reply header
		got := strings.Count(string(entries["ovs/flows.txt"]), "\n")
		// Flows come and go (pods of other tests); the counts are close.
		if got == 0 || got < want-20 || got > want+20 {
			t.Errorf("%s: ovs/flows.txt has %d flows, ovs-ofctl dumps %d", n, got, want)
		}
		for _, name := range []string{"ovs/groups.txt", "ovs/ovsdb-dump.txt", "network/ip-addr.txt", "network/ip-route.txt",
			"network/ip-rule.txt", "network/ip-link.txt", "conntrack/ovs-ct-stats.txt", "pod-logs/antrea-agent.log",
			"pod-logs/antrea-ovs.log", "config/antrea-agent.conf", "version.txt"} {
			if len(entries[name]) == 0 {
				t.Errorf("%s: the bundle has no %s", n, name)
			}
		}
		var sum supportbundle.Summary
		if err := json.Unmarshal(entries[supportbundle.SummaryName], &sum); err != nil {
			t.Fatal(err)
		}
		// The agent's profiles come from its API (in the bundle it makes,
		// or from /debug/pprof); without the API they are listed as
		// missing, with the reason.
		for _, it := range sum.Items {
			if strings.HasPrefix(it.Name, "profiles/") && it.Error == "" && len(entries[it.Name]) == 0 {
				t.Errorf("%s: %s neither collected nor explained", n, it.Name)
			}
		}
		if g, ok := entries["profiles/goroutine.txt"]; ok && !strings.Contains(string(g), "antrea.io/antrea/pkg/agent") {
			t.Errorf("%s: the goroutine profile is not the agent's", n)
		}
		token, _, err := e.Kubectl(ctx, "-n", "kube-system", "exec", "ds/antrea-agent", "-c", "antrea-agent", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
		if err == nil && len(token) > 20 {
			secrets = append(secrets, strings.TrimSpace(token))
		}
		for name, data := range entries {
			for _, s := range secrets {
				if strings.Contains(string(data), s) {
					t.Errorf("%s: %s holds a secret of the kubeconfig or a ServiceAccount token", n, name)
				}
			}
		}
		t.Logf("%s: %d entries, %d bytes compressed; not collected: %+v", n, len(sum.Items), st.Size(), sum.Failed())
	}
	st, err := os.Stat(filepath.Join(dir, "controller.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	total += st.Size()
	t.Logf("bundle: %d bytes in all, %s", total, took.Round(time.Millisecond))
}

// TestAntctlQueryEndpoint: a NetworkPolicy lets the client pods reach the
// server on TCP 8080; antctl query endpoint says it applies to the server
// (isolating it for ingress, allowing the clients' AddressGroup) and names
// the client as a peer of its rule; an unknown pod is one line with the
// closest name.
func TestAntctlQueryEndpoint(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, _ := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "agnhost", Image: lab.AgnhostImage, Args: []string{"pause"}}}}
	}, "server", "client")
	for name, role := range map[string]string{"server": "server", "client": "client"} {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Labels["role"] = role
		if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	port := intstr.FromInt32(8080)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-client"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "server"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}},
	}}
	if _, err := e.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	type rule struct{ Role, Policy, Direction, Action, Services, Effect string }
	type answer struct {
		Applied  []string `json:"appliedPolicies"`
		Isolated []string `json:"isolatedDirections"`
		Rules    []rule
	}
	query := func(pod string) (answer, error) {
		out, errOut, err := antctl(ctx, e, "query", "endpoint", "-n", ns, "-p", pod, "-o", "json")
		var a answer
		if err != nil {
			return a, fmt.Errorf("%v: %s", err, errOut)
		}
		return a, json.Unmarshal([]byte(out), &a)
	}
	policy := "K8sNetworkPolicy:" + ns + "/allow-client"
	labtest.WaitFor(t, ctx, "the controller to compute allow-client with both pods", func() error {
		s, err := query("server")
		if err != nil {
			return err
		}
		c, err := query("client")
		if err != nil {
			return err
		}
		if len(s.Applied) != 1 || s.Applied[0] != policy || len(s.Rules) != 1 || len(c.Rules) != 1 {
			return fmt.Errorf("server %+v, client %+v", s, c)
		}
		sr, cr := s.Rules[0], c.Rules[0]
		if sr.Role != "applied" || sr.Direction != "Ingress" || sr.Action != "Allow" || sr.Services != "TCP/8080" ||
			len(s.Isolated) != 1 || !strings.HasPrefix(s.Isolated[0], "Ingress") {
			return fmt.Errorf("server %+v", s)
		}
		if cr.Role != "peer" || cr.Policy != policy || !strings.Contains(cr.Effect, "allows traffic from the pod to "+ns+"/server on TCP/8080") || len(c.Applied) != 0 {
			return fmt.Errorf("client %+v", c)
		}
		return nil
	})
	_, errOut, err := antctl(ctx, e, "query", "endpoint", "-n", ns, "-p", "sever")
	if err == nil || strings.TrimSpace(errOut) != fmt.Sprintf(`antctl: pod "sever" not found in namespace %s (did you mean "server"?)`, ns) {
		t.Errorf("unknown pod: %v %q", err, errOut)
	}
}
