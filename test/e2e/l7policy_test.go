package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/test/labtest"
)

// l7DocExamples are the YAML examples of docs/antrea-l7-network-policy.md
// (upstream's, unchanged), by metadata.name.
func l7DocExamples(t *testing.T) map[string][]byte {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "docs", "antrea-l7-network-policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(block[1]), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "NetworkPolicy" || meta.Kind == "ClusterNetworkPolicy" {
			out[meta.Metadata.Name] = []byte(block[1])
		}
	}
	return out
}

// docGlob matches s against a host, path or sni pattern as the CRD documents
// it: "*" is any run of characters, everything else is itself, the whole
// of s matches. Written here with a regular expression, not the engine's
// matcher.
func docGlob(pattern, s string, foldCase bool) bool {
	expr := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
	if foldCase {
		expr = "(?i)" + expr
	}
	return regexp.MustCompile(expr).MatchString(s)
}

// l7Request is one probe of the table: an HTTP request (method, host,
// path) or, with sni set, a TLS handshake followed by "GET /".
type l7Request struct {
	method, host, path string
	sni                string
}

// expectedL7 is the documented verdict of req under a rule's l7Protocols:
// allowed if one entry matches (http: method exact or unset, host and path
// globs or unset; tls: sni glob or unset), the request's kind (http or tls)
// and the entry's kind agreeing.
func expectedL7(entries []crdv1beta1.L7Protocol, req l7Request) bool {
	for _, e := range entries {
		switch {
		case req.sni == "" && e.HTTP != nil:
			h := e.HTTP
			// "It does not contain the port associated with the host."
			host := req.host
			if name, _, err := net.SplitHostPort(host); err == nil {
				host = name
			}
			if (h.Method == "" || h.Method == req.method) && (h.Host == "" || docGlob(h.Host, host, true)) &&
				(h.Path == "" || docGlob(h.Path, req.path, false)) {
				return true
			}
		case req.sni != "" && e.TLS != nil:
			if e.TLS.SNI == "" || docGlob(e.TLS.SNI, req.sni, true) {
				return true
			}
		}
	}
	return false
}

// TestL7NetworkPolicyUpstreamExamples: upstream's layer 7 examples (HTTP
// and TLS, ingress and egress), applied unchanged one after the other,
// decide a table of requests from client Pods on both Nodes (one on the web
// server's Node, one on the other) as a matcher written here from the CRD's
// documented semantics says: allowed requests get the server's answer,
// denied HTTP requests the engine's 403 (through a Service's ClusterIP
// too), denied TLS handshakes a reset; the ingress examples drop a Pod that
// is not a client; the denials are in the web Node's audit log.
func TestL7NetworkPolicyUpstreamExamples(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("e2e-l7-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	pod := func(name, node string, labels map[string]string, args ...string) *corev1.Pod {
		c := labtest.TestPodContainer("c", []int{80}, nil)
		if len(args) > 0 {
			c.Args = args
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}}}
	}
	clientLabels := map[string]string{"app": "client", "egress-restriction": "internal-domain-only"}
	for _, p := range []*corev1.Pod{
		pod("web", "node-2", map[string]string{"app": "web"}, "serve", "--http", "80", "--https", "443", "--udp", "5353"),
		pod("client-1", "node-1", clientLabels),
		pod("client-2", "node-2", clientLabels),
		pod("outsider", "node-1", nil),
	} {
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"web", "client-1", "client-2", "outsider"})
	if err != nil {
		t.Fatal(err)
	}
	web := pods["web"].Status.PodIP
	svc, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80)}, {Name: "https", Port: 443, TargetPort: intstr.FromInt32(443)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcIP := svc.Spec.ClusterIP
	examples := l7DocExamples(t)

	// askAt sends reqs from a Pod to address to, the HTTP ones on
	// kept-alive connections (one per Host), the TLS ones on one connection
	// per server name, and returns one verdict per request: "200 <answer>",
	// "403", "reset" or "error: ...".
	askAt := func(from, to string, reqs []l7Request) []string {
		t.Helper()
		var plain, secure []string
		for _, r := range reqs {
			if r.sni != "" {
				secure = append(secure, "GET / "+r.sni)
			} else {
				plain = append(plain, r.method+" "+r.path+" "+r.host)
			}
		}
		verdicts := map[string]string{}
		run := func(port string, tls bool, lines []string) {
			if len(lines) == 0 {
				return
			}
			args := []string{"antrea-testpod", "http", "--timeout", "2s", "--to", net.JoinHostPort(to, port)}
			if tls {
				args = append(args, "--tls")
			}
			out, err := e.Exec(ctx, ns, from, append(args, lines...)...)
			if err != nil {
				t.Fatalf("%s: %v: %v: %s", from, args, err, out)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			if len(got) != len(lines) {
				t.Fatalf("%s: %d answers to %d requests: %s", from, len(got), len(lines), out)
			}
			for i, l := range got {
				_, verdict, _ := strings.Cut(l, ": ")
				if strings.HasPrefix(verdict, "403 ") {
					verdict = "403"
				}
				verdicts[fmt.Sprint(tls, lines[i])] = verdict
			}
		}
		run("80", false, plain)
		run("443", true, secure)
		out := make([]string, len(reqs))
		for i, r := range reqs {
			if r.sni != "" {
				out[i] = verdicts[fmt.Sprint(true, "GET / "+r.sni)]
			} else {
				out[i] = verdicts[fmt.Sprint(false, r.method+" "+r.path+" "+r.host)]
			}
		}
		return out
	}
	ask := func(from string, reqs []l7Request) []string {
		t.Helper()
		return askAt(from, web, reqs)
	}
	want := func(entries []crdv1beta1.L7Protocol, r l7Request) string {
		switch {
		case expectedL7(entries, r) && r.sni != "":
			return "200 web GET /"
		case expectedL7(entries, r):
			return "200 web " + r.method + " " + r.path
		case r.sni != "":
			return "reset"
		}
		return "403"
	}
	httpTable := []l7Request{
		{method: "GET", host: "foo.bar.com", path: "/api/v2/users"},
		{method: "POST", host: "foo.bar.com", path: "/api/v2/users"},
		{method: "GET", host: "foo.bar.com", path: "/api/v1/users"},
		{method: "GET", host: "foo.bar.com:80", path: "/api/v2/"},
		{method: "GET", host: "other.example", path: "/api/v2/users"},
		{method: "DELETE", host: "www.bar.com", path: "/admin"},
		{method: "GET", host: "a.b.bar.com", path: "/"},
		{method: "GET", host: "bar.com", path: "/"},
		{method: "PUT", host: "www.bar.org", path: "/x"},
	}
	tlsTable := []l7Request{{sni: "foo.bar.com"}, {sni: "www.bar.com"}, {sni: "bar.com"}, {sni: "evil.example"}}

	for _, tc := range []struct {
		name  string
		table []l7Request
	}{
		{"ingress-allow-http-request-to-api-v2", httpTable},
		{"allow-web-access-to-internal-domain", httpTable},
		{"ingress-allow-tls-handshake", tlsTable},
		{"allow-tls-handshake-to-internal", tlsTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "allow-tls-handshake-to-internal" {
				// The example selects egress-restriction=internal-tls-only.
				for _, c := range []string{"client-1", "client-2"} {
					patch := []byte(`{"metadata":{"labels":{"egress-restriction":"internal-tls-only"}}}`)
					if _, err := e.Client.CoreV1().Pods(ns).Patch(ctx, c, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var entries []crdv1beta1.L7Protocol
			var ingress bool
			var del func()
			switch doc := examples[tc.name]; {
			case strings.Contains(string(doc), "kind: ClusterNetworkPolicy"):
				var p crdv1beta1.ClusterNetworkPolicy
				if err := yaml.UnmarshalStrict(doc, &p); err != nil {
					t.Fatal(err)
				}
				entries = p.Spec.Egress[1].L7Protocols
				if _, err := crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				del = func() {
					_ = crd.CrdV1beta1().ClusterNetworkPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
				}
			case doc != nil:
				var p crdv1beta1.NetworkPolicy
				if err := yaml.UnmarshalStrict(doc, &p); err != nil {
					t.Fatal(err)
				}
				entries, ingress = p.Spec.Ingress[0].L7Protocols, true
				if _, err := crd.CrdV1beta1().NetworkPolicies(ns).Create(ctx, &p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				del = func() {
					_ = crd.CrdV1beta1().NetworkPolicies(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
				}
			default:
				t.Fatalf("docs/antrea-l7-network-policy.md has no example %s", tc.name)
			}
			// A denied request of the table shows the rule realized on
			// each client's path.
			var denied l7Request
			for _, r := range tc.table {
				if !expectedL7(entries, r) {
					denied = r
					break
				}
			}
			defer func() {
				del()
				// The next example starts without this one's rules.
				for _, from := range []string{"client-1", "client-2"} {
					labtest.WaitFor(t, ctx, tc.name+" gone for "+from, func() error {
						if got := ask(from, []l7Request{denied}); got[0] == "403" || got[0] == "reset" {
							return fmt.Errorf("%+v still %s", denied, got[0])
						}
						return nil
					})
				}
			}()
			for _, from := range []string{"client-1", "client-2"} {
				labtest.WaitFor(t, ctx, tc.name+" enforced for "+from, func() error {
					if got := ask(from, []l7Request{denied}); got[0] != want(entries, denied) {
						return fmt.Errorf("%+v: %s", denied, got[0])
					}
					return nil
				})
			}
			for _, from := range []string{"client-1", "client-2"} {
				got := ask(from, tc.table)
				allowed := 0
				for i, r := range tc.table {
					if expectedL7(entries, r) {
						allowed++
					}
					if w := want(entries, r); got[i] != w {
						t.Errorf("%s %s %+v: got %q, want %q", tc.name, from, r, got[i], w)
					}
				}
				t.Logf("%s from %s: %d requests, %d of them allowed by the documented semantics", tc.name, from, len(tc.table), allowed)
			}
			if tc.name == "allow-web-access-to-internal-domain" {
				// The layer 7 rule has no ports: it selects every protocol,
				// and what is not TCP is dropped (upstream's note: "non-HTTP
				// requests will be automatically dropped"); a Pod the policy
				// does not select is answered.
				udpTo := net.JoinHostPort(web, "5353")
				for _, from := range []string{"client-1", "client-2", "outsider"} {
					out, err := e.Exec(ctx, ns, from, "antrea-testpod", "connect", "--protocol", "udp", "--to", udpTo, "--timeout", "2s")
					answered := err == nil && strings.Contains(out, "web")
					if answered != (from == "outsider") {
						t.Errorf("UDP from %s to web:5353 under %s: answered %v (%v: %s), want %v", from, tc.name, answered, err, out, from == "outsider")
					}
				}
			}
			if tc.name == "ingress-allow-http-request-to-api-v2" {
				// Through a Service: the engine's answers reach the client
				// from the ClusterIP it connected to.
				for _, from := range []string{"client-1", "client-2"} {
					got := askAt(from, svcIP, tc.table)
					for i, r := range tc.table {
						if w := want(entries, r); got[i] != w {
							t.Errorf("%s %s via Service %s %+v: got %q, want %q", tc.name, from, svcIP, r, got[i], w)
						}
					}
				}
			}
			if ingress {
				// drop-other: a Pod without app=client is dropped.
				if out, err := e.Exec(ctx, ns, "outsider", "antrea-testpod", "connect", "--protocol", "tcp",
					"--to", net.JoinHostPort(web, "80"), "--timeout", "1s"); !strings.Contains(out, "timeout") {
					t.Errorf("outsider to web under %s: %v %s, want a timeout (drop-other)", tc.name, err, out)
				}
				logPath := e.NodeHostPath("node-2", "/var/log/antrea/networkpolicy/np.log")
				labtest.WaitFor(t, ctx, "the denial in node-2's audit log", func() error {
					f, err := os.Open(logPath)
					if err != nil {
						return err
					}
					defer f.Close()
					sc := bufio.NewScanner(f)
					for sc.Scan() {
						if l := sc.Text(); strings.Contains(l, " L7Engine AntreaNetworkPolicy:"+ns+"/"+tc.name+" ") && strings.Contains(l, " Reject ") {
							return nil
						}
					}
					return fmt.Errorf("no L7Engine Reject line of %s in %s", tc.name, logPath)
				})
			}
		})
	}
}
