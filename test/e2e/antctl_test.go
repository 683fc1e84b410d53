package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		for _, c := range []string{"ovs", "datapath", "tunnel-geneve", "tunnel-vxlan", "conntrack"} {
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
	want := []string{"pod-to-pod (same node)", "pod-to-pod (across nodes)", "pod-to-Service", "DNS", "networkpolicy-deny", "networkpolicy-allow"}
	if len(rs) != len(want) {
		t.Fatalf("checks %v, want %v", rs, want)
	}
	for i, r := range rs {
		if r.Check != want[i] || r.Verdict != "PASS" {
			t.Errorf("check %d: %s %s (%s), want %s PASS", i, r.Check, r.Verdict, r.Detail, want[i])
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
