package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/testpod"
	"antrea.io/antrea/test/labtest"
)

// toFQDN on real nodes, with names the test controls: the lab's CoreDNS
// forwards the zone lab.test to the outside host's DNS server, whose zone
// file the test rewrites. A ClusterNetworkPolicy lets a Pod reach
// *.lab.test on port 80 and DNS, and drops the rest of its egress. The
// router's address (172.30.0.4, which answers TCP port 80 with a reset)
// tells a dropped connection (timeout) from an allowed one (refused):
//   - www.lab.test (the outside host) is reached at the first connection
//     after its lookup;
//   - the router's address is dropped until a name of the zone resolves to
//     it, then reached at the first connection after that lookup, by name
//     and by address; also when the name was looked up over TCP;
//   - (ANTREA_E2E_FQDN_EXPIRY=1, make conformance) once the name's answer no longer holds it and its TTL has passed, the
//     router's address is dropped again.
func TestAToFQDNRuleFollowsTheNamesAnswersOnTheLab(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	zoneFile := e.Opts.OutsideZoneFile()
	t.Cleanup(func() {
		if err := testpod.WriteZone(zoneFile, lab.DefaultOutsideZone()); err != nil {
			t.Errorf("restore the lab's zone: %v", err)
		}
	})
	ns, _ := createPods(t, e, ctx, func(string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: e.Nodes[0], Containers: []corev1.Container{{
			Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}}
	}, "client")
	router := lab.RouterIP().String()
	inClient := func(argv ...string) (string, string, error) {
		return e.Kubectl(ctx, append([]string{"exec", "-n", ns, "client", "--"}, argv...)...)
	}
	// reach is one connection's verdict: "answered", "refused" (reached
	// the host, nothing listens) or "timeout" (dropped).
	reach := func(target string) string {
		// The outside host's port 80 answers its name, not HTTP, and
		// closes: curl prints it and exits 56.
		out, stderr, err := inClient("curl", "-sS", "--http0.9", "-m", "2", "http://"+target+"/")
		switch {
		case strings.TrimSpace(out) == "outside":
			return "answered"
		case strings.Contains(stderr, "(7)"):
			return "refused"
		case strings.Contains(stderr, "(28)"):
			return "timeout"
		case strings.Contains(stderr, "(6)"):
			return "unresolved"
		}
		return fmt.Sprintf("other: %v %s %s", err, out, stderr)
	}
	if got := reach(router); got != "refused" {
		t.Fatalf("without policy the router's port 80: %s, want refused (its reset tells allowed from dropped)", got)
	}

	policy := fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: fqdn-%[1]s
spec:
  priority: 5
  tier: securityops
  appliedTo:
  - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
  egress:
  - action: Allow
    name: allow-lab-test
    to: [{fqdn: "*.lab.test"}]
    ports: [{protocol: TCP, port: 80}]
  - action: Allow
    name: allow-dns
    to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
      podSelector: {matchLabels: {k8s-app: kube-dns}}
    ports: [{protocol: UDP, port: 53}, {protocol: TCP, port: 53}]
  - action: Drop
    name: drop-the-rest
    to: [{ipBlock: {cidr: 0.0.0.0/0}}]
`, ns)
	file := filepath.Join(t.TempDir(), "fqdn.yaml")
	if err := os.WriteFile(file, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := e.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
	}
	t.Cleanup(func() { _, _, _ = e.Kubectl(context.Background(), "delete", "-f", file, "--ignore-not-found") })
	labtest.WaitFor(t, ctx, "the policy drops the router's address", func() error {
		if got := reach(router); got != "timeout" {
			return fmt.Errorf("router: %s", got)
		}
		return nil
	})
	// Each check below is one connection, right after the lookup (curl
	// resolves, then connects): the rule must allow it at once.
	if got := reach("www.lab.test"); got != "answered" {
		t.Errorf("www.lab.test (the outside host): %s, want answered at the first connection", got)
	}

	setZone := func(name string, ttl uint32, addr string) {
		t.Helper()
		recs := append(lab.DefaultOutsideZone(), testpod.ZoneRecord{Name: name, TTL: ttl, Addr: netip.MustParseAddr(addr)})
		if err := testpod.WriteZone(zoneFile, recs); err != nil {
			t.Fatal(err)
		}
	}
	setZone("moving.lab.test", 5, router)
	if got := reach("moving.lab.test"); got != "refused" {
		t.Errorf("moving.lab.test -> the router: %s at the first connection after the lookup, want refused (allowed)", got)
	}
	if got := reach(router); got != "refused" {
		t.Errorf("the router's address after moving.lab.test resolved to it: %s, want refused (allowed)", got)
	}

	// Learned from an answer over TCP: dig +tcp, then the address alone.
	// The control plane's address answers port 80 with a reset too.
	cp := lab.ControlPlaneIP().String()
	if got := reach(cp); got != "timeout" {
		t.Errorf("the control plane's address before any name resolved to it: %s, want timeout (dropped)", got)
	}
	setZone("tcp.lab.test", 30, cp)
	out, stderr, err := inClient("dig", "+short", "+tcp", "tcp.lab.test")
	if err != nil || strings.TrimSpace(out) != cp {
		t.Fatalf("dig +tcp tcp.lab.test: %q %v %s, want %s", out, err, stderr, cp)
	}
	if got := reach(cp); got != "refused" {
		t.Errorf("the control plane's address after tcp.lab.test resolved to it over TCP: %s, want refused (allowed)", got)
	}

	if os.Getenv("ANTREA_E2E_FQDN_EXPIRY") == "" {
		t.Log("the expiry after the TTL (about 20 s) runs under ANTREA_E2E_FQDN_EXPIRY=1 (make conformance)")
		return
	}
	// The name moves away; once its TTL (5 s) has passed and no connection
	// uses the address (a reset connection's conntrack entry lingers about
	// 10 s), the address is dropped again.
	setZone("moving.lab.test", 5, lab.OutsideIP().String())
	if got := reach("moving.lab.test"); got != "answered" {
		t.Errorf("moving.lab.test -> the outside host: %s, want answered", got)
	}
	labtest.WaitFor(t, ctx, "the router's address dropped again after the name moved away", func() error {
		if got := reach(router); got != "timeout" {
			return fmt.Errorf("router: %s", got)
		}
		return nil
	})

}
