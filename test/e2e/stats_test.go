package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/test/labtest"
)

// TestNetworkPolicyStats: per-rule statistics end to end on the lab. A K8s
// NetworkPolicy lets x/c reach x/a (x/a is isolated); an ACNP on x/b has
// an Allow rule (from x/a), a Drop rule (from y/a) and an unnamed Allow
// rule (from x/c), which the mutating webhook names; an Antrea
// NetworkPolicy on y/a has a Drop rule (from x/b) and an Allow rule (from
// x/c). The test sends known connections to one rule of each Antrea-native
// policy and none to the other, and HTTP transfers of a known size (curl
// of agnhost's /echo with a 60,000-byte message: that many bytes each way)
// through the Allow rules, then waits until kubectl get
// networkpolicystats / antreaclusternetworkpolicystats /
// antreanetworkpolicystats show at least that many sessions on the rules
// that got traffic and none on the others, and on the Allow rules every
// packet of the transfers in both directions (at least the bytes curl
// sent and received), while a Drop rule counts its dropped packets as
// sessions; antctl get networkpolicystats -o json agrees. The agents
// report every 5 s on the lab (statsCollectionInterval in the lab's
// overlay); the test logs how long after the last connection the stats
// showed it.
func TestNetworkPolicyStats(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := newPolicyLab(t, e, ctx)
	p.apply(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-c, namespace: $X}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: c}}
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: $R-stats}
spec:
  tier: application
  priority: 5
  appliedTo:
  - podSelector: {matchLabels: {pod: b}}
    namespaceSelector: {matchLabels: {acnp-ns: $X}}
  ingress:
  - name: allow-from-xa
    action: Allow
    from:
    - podSelector: {matchLabels: {pod: a}}
      namespaceSelector: {matchLabels: {acnp-ns: $X}}
  - name: drop-from-ya
    action: Drop
    from:
    - podSelector: {matchLabels: {pod: a}}
      namespaceSelector: {matchLabels: {acnp-ns: $Y}}
  - action: Allow
    from:
    - podSelector: {matchLabels: {pod: c}}
      namespaceSelector: {matchLabels: {acnp-ns: $X}}
---
apiVersion: crd.antrea.io/v1beta1
kind: NetworkPolicy
metadata: {name: stats, namespace: $Y}
spec:
  tier: application
  priority: 5
  appliedTo:
  - podSelector: {matchLabels: {pod: a}}
  ingress:
  - name: drop-from-xb
    action: Drop
    from:
    - podSelector: {matchLabels: {pod: b}}
      namespaceSelector: {matchLabels: {acnp-ns: $X}}
  - name: allow-from-xc
    action: Allow
    from:
    - podSelector: {matchLabels: {pod: c}}
      namespaceSelector: {matchLabels: {acnp-ns: $X}}
`)
	acnp := p.name("stats")
	p.waitRealized(t, acnp)
	// Realized everywhere once the drops hold (these probes count too:
	// the expectations below are lower bounds for the rules they hit).
	p.expect(t, "the policies are realized", matrix{
		{"x/b", "x/a", ""}: timedOut, {"x/b", "y/a", ""}: timedOut,
	})

	// Known traffic: n connections from x/a to x/b (ACNP allow-from-xa),
	// from x/c to x/a (the K8s NetworkPolicy), and from x/b to y/a (ANNP
	// drop-from-xb). Nothing from y/a to x/b (drop-from-ya) nor from x/c to
	// y/a (allow-from-xc).
	const n = 4
	for i := range n {
		for _, c := range []struct {
			pr   pair
			want string
		}{{pair{"x/a", "x/b", ""}, connected}, {pair{"x/c", "x/a", ""}, connected}, {pair{"x/b", "y/a", ""}, timedOut}} {
			if got, detail := p.probe(c.pr, probeTimeout); got != c.want {
				t.Fatalf("connection %d %s→%s: %s, want %s (%s)", i, c.pr.from, c.pr.to, got, c.want, detail)
			}
		}
	}
	// Known transfers through the Allow rules: allow-from-xa (x/a→x/b,
	// across Nodes), the K8s NetworkPolicy (x/c→x/a, one Node) and the
	// ACNP's unnamed rule (x/c→x/b).
	const transfers, size = 3, 60_000
	moved := map[pair]int64{} // bytes curl sent and received, headers included
	for range transfers {
		for _, pr := range []pair{{"x/a", "x/b", ""}, {"x/c", "x/a", ""}, {"x/c", "x/b", ""}} {
			moved[pr] += p.transfer(t, pr, size)
		}
	}
	sent := time.Now()
	// The name the webhook gave the ACNP's third rule, as stored.
	unnamed := strings.TrimSpace(p.kubectl(t, "get", "acnp", acnp, "-o", "jsonpath={.spec.ingress[2].name}"))
	if !regexp.MustCompile(`^ingress-allow-[0-9a-f]{7}$`).MatchString(unnamed) {
		t.Fatalf("the unnamed rule was stored as %q, want upstream's ingress-allow-<7 hex digits>", unnamed)
	}

	get := func(resource, ns, name string) (*statsv1alpha1.AntreaClusterNetworkPolicyStats, error) {
		args := []string{"get", resource, name, "-o", "json"}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		stdout, stderr, err := e.Kubectl(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr)
		}
		var s statsv1alpha1.AntreaClusterNetworkPolicyStats
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			return nil, fmt.Errorf("kubectl get %s -o json printed %q: %v", resource, stdout, err)
		}
		return &s, nil
	}
	ruleStats := func(s *statsv1alpha1.AntreaClusterNetworkPolicyStats, name string) (statsv1alpha1.TrafficStats, bool) {
		for _, r := range s.RuleTrafficStats {
			if r.Name == name {
				return r.TrafficStats, true
			}
		}
		return statsv1alpha1.TrafficStats{}, false
	}
	rule := func(s *statsv1alpha1.AntreaClusterNetworkPolicyStats, name string) (int64, bool) {
		ts, ok := ruleStats(s, name)
		return ts.Sessions, ok
	}
	// wholeConnections says what is wrong with an Allow rule's stats for
	// the probes and transfers it allowed: a session each, and every packet
	// of the transfers both ways (each packet carries at most an MTU).
	wholeConnections := func(what string, ts statsv1alpha1.TrafficStats, bytes int64) []string {
		var wrong []string
		if ts.Sessions < n+transfers {
			wrong = append(wrong, fmt.Sprintf("%s: %d sessions, want >= %d", what, ts.Sessions, n+transfers))
		}
		if ts.Bytes < bytes || ts.Packets < bytes/1500 {
			wrong = append(wrong, fmt.Sprintf("%s: %d packets, %d bytes, want every packet of the transfers: >= %d packets, >= %d bytes",
				what, ts.Packets, ts.Bytes, bytes/1500, bytes))
		}
		return wrong
	}
	var final string
	labtest.WaitFor(t, ctx, "the stats of the connections sent", func() error {
		np, err := get("networkpolicystats", p.x, "a-from-c")
		if err != nil {
			return err
		}
		cnp, err := get("antreaclusternetworkpolicystats", "", acnp)
		if err != nil {
			return err
		}
		annp, err := get("antreanetworkpolicystats", p.y, "stats")
		if err != nil {
			return err
		}
		wrong := wholeConnections("NetworkPolicy a-from-c", np.TrafficStats, moved[pair{"x/c", "x/a", ""}])
		xa, _ := ruleStats(cnp, "allow-from-xa")
		wrong = append(wrong, wholeConnections("ACNP rule allow-from-xa", xa, moved[pair{"x/a", "x/b", ""}])...)
		if ts, ok := ruleStats(cnp, unnamed); !ok || ts.Sessions < transfers || ts.Bytes < moved[pair{"x/c", "x/b", ""}] {
			wrong = append(wrong, fmt.Sprintf("ACNP rule %s (unnamed in the YAML): %+v (listed %v), want >= %d sessions, >= %d bytes",
				unnamed, ts, ok, transfers, moved[pair{"x/c", "x/b", ""}]))
		}
		if ts, _ := ruleStats(annp, "drop-from-xb"); ts.Packets != ts.Sessions || ts.Bytes < 40*ts.Packets {
			wrong = append(wrong, fmt.Sprintf("ANNP rule drop-from-xb: %+v, want each dropped SYN a session (packets = sessions, >= 40 bytes each)", ts))
		}
		for _, c := range []struct {
			s       *statsv1alpha1.AntreaClusterNetworkPolicyStats
			what    string
			hit     string
			hitMin  int64
			missed  string
			missMax int64
		}{{cnp, "ACNP", "allow-from-xa", n + transfers, "drop-from-ya", 0}, {annp, "ANNP", "drop-from-xb", n, "allow-from-xc", 0}} {
			got, ok := rule(c.s, c.hit)
			if !ok || got < c.hitMin {
				wrong = append(wrong, fmt.Sprintf("%s rule %s: %d sessions (listed %v), want >= %d", c.what, c.hit, got, ok, c.hitMin))
			}
			if got, _ := rule(c.s, c.missed); got != 0 {
				wrong = append(wrong, fmt.Sprintf("%s rule %s: %d sessions, want 0 (no traffic sent)", c.what, c.missed, got))
			}
			if c.s.TrafficStats.Sessions < c.hitMin {
				wrong = append(wrong, fmt.Sprintf("%s total: %d sessions, want >= %d", c.what, c.s.TrafficStats.Sessions, c.hitMin))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%s", strings.Join(wrong, "; "))
		}
		final = fmt.Sprintf("np %+v; acnp %+v %+v; annp %+v %+v", np.TrafficStats, cnp.TrafficStats, cnp.RuleTrafficStats,
			annp.TrafficStats, annp.RuleTrafficStats)
		return nil
	})
	t.Logf("stats visible %s after the last connection (agents report every 5 s): %s", time.Since(sent).Round(10*time.Millisecond), final)
	t.Logf("bytes curl moved (both ways, headers included): x/a→x/b %d, x/c→x/a %d, x/c→x/b %d",
		moved[pair{"x/a", "x/b", ""}], moved[pair{"x/c", "x/a", ""}], moved[pair{"x/c", "x/b", ""}])

	// The tables kubectl prints.
	out := p.kubectl(t, "get", "networkpolicystats", "-A")
	if !strings.Contains(out, "SESSIONS") || !strings.Contains(out, "a-from-c") {
		t.Errorf("kubectl get networkpolicystats -A printed:\n%s\nwant a-from-c with the SESSIONS column", out)
	}
	t.Logf("kubectl get networkpolicystats -A:\n%s", out)
	t.Logf("kubectl get antreaclusternetworkpolicystats:\n%s", p.kubectl(t, "get", "antreaclusternetworkpolicystats", acnp))

	// antctl agrees with the API (it reads the same objects).
	stdout, stderr, err := antctl(ctx, e, "get", "networkpolicystats", "-n", p.x, "-o", "json")
	if err != nil {
		t.Fatalf("antctl get networkpolicystats: %v\n%s", err, stderr)
	}
	var items []statsv1alpha1.NetworkPolicyStats
	if err := json.Unmarshal([]byte(stdout), &items); err != nil {
		t.Fatalf("antctl -o json printed %q: %v", stdout, err)
	}
	found := false
	for _, it := range items {
		if it.Name == "a-from-c" {
			found = true
			if it.TrafficStats.Sessions < n+transfers || it.TrafficStats.Bytes < moved[pair{"x/c", "x/a", ""}] {
				t.Errorf("antctl: a-from-c has %+v, want >= %d sessions and >= %d bytes", it.TrafficStats, n+transfers, moved[pair{"x/c", "x/a", ""}])
			}
		}
	}
	if !found {
		t.Errorf("antctl get networkpolicystats -n %s -o json printed no a-from-c: %s", p.x, stdout)
	}
	stdout, stderr, err = antctl(ctx, e, "get", "antreaclusternetworkpolicystats", acnp)
	if err != nil || !strings.Contains(stdout, "allow-from-xa=") {
		t.Errorf("antctl get antreaclusternetworkpolicystats %s: %v\n%s%s", acnp, err, stdout, stderr)
	}
	t.Logf("antctl get antreaclusternetworkpolicystats %s:\n%s", acnp, stdout)

	// ANTREA_E2E_MEASURE=1: the latency from one connection to the stats
	// that count it, 10 times in a row.
	if os.Getenv("ANTREA_E2E_MEASURE") != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", e.Opts.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		st := versioned.NewForConfigOrDie(cfg).StatsV1alpha1().AntreaClusterNetworkPolicyStatses()
		sessions := func() int64 {
			s, err := st.Get(ctx, acnp, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v, _ := rule(s, "allow-from-xa")
			return v
		}
		var took []time.Duration
		for range 10 {
			before := sessions()
			if got, detail := p.probe(pair{"x/a", "x/b", ""}, probeTimeout); got != connected {
				t.Fatalf("x/a→x/b: %s (%s)", got, detail)
			}
			start := time.Now()
			for sessions() <= before {
				if time.Since(start) > time.Minute {
					t.Fatal("a connection never showed in the stats")
				}
				time.Sleep(50 * time.Millisecond)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("connection → counted in antreaclusternetworkpolicystats (interval 5 s), 10 tries: p50 %s, min %s, max %s; all %v",
			percentile(took, 50).Round(10*time.Millisecond), took[0].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond), took)
	}

	// A user bound only to the chart's antctl ClusterRole runs antctl:
	// stats, the controlplane objects, feature gates, a Traceflow; and may
	// not post stats.
	t.Run("a user bound only to the antctl ClusterRole", func(t *testing.T) {
		sa := "antctl-user-" + p.run
		p.kubectl(t, "create", "serviceaccount", "-n", p.x, sa)
		p.kubectl(t, "create", "clusterrolebinding", sa, "--clusterrole=antctl", "--serviceaccount="+p.x+":"+sa)
		t.Cleanup(func() {
			_, _, _ = e.Kubectl(context.Background(), "delete", "clusterrolebinding", sa, "--ignore-not-found")
		})
		token := strings.TrimSpace(p.kubectl(t, "create", "token", "-n", p.x, sa))
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		data, err := os.ReadFile(e.Opts.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p.kubectl(t, "--kubeconfig="+kubeconfig, "config", "set-credentials", sa, "--token="+token)
		p.kubectl(t, "--kubeconfig="+kubeconfig, "config", "set-context", "--current", "--user="+sa)
		run := func(args ...string) (string, error) {
			cmd := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antctl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, args := range [][]string{
			{"get", "networkpolicystats", "-n", p.x},
			{"get", "antreanetworkpolicystats", "-n", p.y},
			{"get", "antreaclusternetworkpolicystats"},
			{"get", "networkpolicy"},
			{"get", "addressgroup"},
			{"get", "appliedtogroup"},
			{"get", "featuregates"},
			{"version"},
			{"traceflow", "-S", p.x + "/a", "-D", p.x + "/b"},
		} {
			out, err := run(args...)
			if err != nil || strings.Contains(out, "forbidden") {
				t.Errorf("antctl %s as %s: %v\n%s", strings.Join(args, " "), sa, err, out)
				continue
			}
			t.Logf("antctl %s: ok (%d lines)", strings.Join(args, " "), strings.Count(out, "\n"))
		}
		stdout, _, _ := e.Kubectl(ctx, "--kubeconfig="+kubeconfig, "auth", "can-i", "create", "nodestatssummaries.controlplane.antrea.io")
		if strings.TrimSpace(stdout) != "no" {
			t.Errorf("kubectl auth can-i create nodestatssummaries as %s: %q, want no", sa, stdout)
		}
	})

	// A deleted policy's stats go.
	p.delete(t, "clusternetworkpolicy", acnp)
	labtest.WaitFor(t, ctx, "the deleted ACNP's stats gone", func() error {
		_, stderr, err := e.Kubectl(ctx, "get", "antreaclusternetworkpolicystats", acnp)
		if err == nil || !strings.Contains(stderr, "NotFound") && !strings.Contains(stderr, "not found") {
			return fmt.Errorf("still served (%v: %s)", err, stderr)
		}
		return nil
	})
}

// transfer fetches agnhost's /echo with a message of size bytes from one
// pod to another with curl: size bytes go each way (the message in the
// request line, then in the response body). It returns the bytes curl
// sent and received, headers included, after checking them.
func (p *policyLab) transfer(t *testing.T, pr pair, size int) int64 {
	t.Helper()
	ns, pod := p.split(pr.from)
	script := fmt.Sprintf(`curl -sS -o /dev/null --max-time 10 -w '%%{size_request} %%{size_download}' "http://%s:80/echo?msg=$(head -c %d /dev/zero | tr '\0' a)"`,
		p.ip(pr.to), size)
	stdout, stderr, err := p.e.Kubectl(p.ctx, "exec", "-n", ns, pod, "--", "sh", "-c", script)
	if err != nil {
		t.Fatalf("curl %s→%s: %v: %s%s", pr.from, pr.to, err, stdout, stderr)
	}
	var req, down int64
	if _, err := fmt.Sscan(stdout, &req, &down); err != nil || req < int64(size) || down < int64(size) {
		t.Fatalf("curl %s→%s of a %d-byte message: sent %d and received %d bytes (%q, %v), want at least the message each way",
			pr.from, pr.to, size, req, down, stdout, err)
	}
	return req + down
}
