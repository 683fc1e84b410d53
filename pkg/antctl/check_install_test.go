package antctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// checkCluster is an API server (client-go's fake) whose pods start at once,
// with a fake datapath behind `kubectl exec ... agnhost connect`: a test
// breaks the datapath as a broken Antrea would and antctl check
// installation must say FAIL for exactly what broke.
type checkCluster struct {
	kube *fake.Clientset
	// ignorePolicy: NetworkPolicies are never enforced.
	ignorePolicy bool
	// tunnelDown: nothing crosses nodes.
	tunnelDown bool
	// noServices: ClusterIPs go nowhere.
	noServices bool
}

var checkPodIPs = map[string]string{"server": "10.10.0.5", "client-local": "10.10.0.6", "client-remote": "10.10.1.7"}

func newCheckCluster(t *testing.T) *checkCluster {
	t.Helper()
	var nodes []runtime.Object
	for _, n := range []string{"node-1", "node-2"} {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	// Antrea runs: its agent DaemonSet is where the manifest puts it.
	nodes = append(nodes, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: antreaNamespace, Name: agentDaemonSet}})
	c := &checkCluster{kube: fake.NewSimpleClientset(nodes...)}
	c.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Spec.NodeName = p.Spec.NodeSelector["kubernetes.io/hostname"]
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: checkPodIPs[p.Name],
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		return false, nil, nil
	})
	c.kube.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Service).Spec.ClusterIP = "10.96.0.10"
		return false, nil, nil
	})
	return c
}

// exec answers `agnhost connect` from a client pod as the datapath would.
func (c *checkCluster) exec(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
	if len(argv) < 2 || argv[0] != "/agnhost" || argv[1] != "connect" {
		return fmt.Errorf("unexpected command %q", argv)
	}
	dest := argv[len(argv)-1]
	reachesServer := strings.HasPrefix(dest, checkPodIPs["server"]+":") ||
		(!c.noServices && (strings.HasPrefix(dest, "10.96.0.10:") || strings.HasPrefix(dest, "server."+ns+".svc")))
	policies, err := c.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	isolated, allowed := false, false
	for _, p := range policies.Items {
		isolated = true
		allowed = allowed || len(p.Spec.Ingress) > 0
	}
	switch {
	case !reachesServer, c.tunnelDown && pod == "client-remote",
		!c.ignorePolicy && isolated && !allowed:
		io.WriteString(stderr, "TIMEOUT\n")
		return errors.New("command terminated with exit code 1")
	}
	return nil
}

func (c *checkCluster) run(t *testing.T) result {
	t.Helper()
	saved := execInPod
	defer func() { execInPod = saved }()
	execInPod = func(*options) podExec { return c.exec }
	return runAntctlWith(t, &Clients{Kube: c.kube}, "check", "installation", "--connect-timeout", "1s", "--timeout", "10s")
}

// verdictsOf reads the CHECK and RESULT columns of the printed table.
func verdictsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range rows(out)[1:] {
		got[r[0]] = r[1]
	}
	return got
}

func TestCheckInstallationReportsFailWhereTheDatapathIsBroken(t *testing.T) {
	checks := []string{"pod-to-pod (same node)", "pod-to-pod (across nodes)", "pod-to-Service", "DNS", "networkpolicy-deny", "networkpolicy-allow"}
	cases := []struct {
		name    string
		breakIt func(c *checkCluster)
		// fail lists the checks that must say FAIL; every other one PASS.
		fail []string
	}{
		{name: "a working datapath passes every check"},
		{name: "an agent that never enforces NetworkPolicy fails the deny check",
			breakIt: func(c *checkCluster) { c.ignorePolicy = true }, fail: []string{"networkpolicy-deny"}},
		{name: "a tunnel that carries nothing fails the checks from the other node",
			breakIt: func(c *checkCluster) { c.tunnelDown = true },
			fail:    []string{"pod-to-pod (across nodes)", "pod-to-Service", "networkpolicy-allow"}},
		{name: "ClusterIPs that go nowhere fail the Service and DNS checks",
			breakIt: func(c *checkCluster) { c.noServices = true }, fail: []string{"pod-to-Service", "DNS"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCheckCluster(t)
			if tc.breakIt != nil {
				tc.breakIt(c)
			}
			r := c.run(t)
			t.Logf("antctl check installation printed:\n%s", r.out)
			got := verdictsOf(t, r.out)
			for _, check := range checks {
				want := verdictPass
				for _, f := range tc.fail {
					if f == check {
						want = verdictFail
					}
				}
				if got[check] != want {
					t.Errorf("%s: %s, want %s\n%s", check, got[check], want, r.out)
				}
			}
			wantErr := fmt.Sprintf("check installation: %d check(s) failed", len(tc.fail))
			switch {
			case len(tc.fail) == 0 && r.runErr != nil:
				t.Errorf("exit error %v, want none", r.runErr)
			case len(tc.fail) > 0 && (r.runErr == nil || r.runErr.Error() != wantErr):
				t.Errorf("exit error %v, want %q (antctl exits 1)", r.runErr, wantErr)
			}
			// The Namespace goes, also after a failure.
			nss, err := c.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nss.Items) != 0 {
				t.Errorf("Namespace %s left behind", nss.Items[0].Name)
			}
		})
	}
}

func TestCheckInstallationReportsTheWireGuardBackendOfEveryNode(t *testing.T) {
	node := func(name, key, backend string) corev1.Node {
		n := corev1.Node{}
		n.Name = name
		if key != "" {
			n.Annotations = map[string]string{"node.antrea.io/wireguard-public-key": key, "node.antrea.io/wireguard-backend": backend}
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		nodes   []corev1.Node
		verdict string
		want    []string
	}{
		{"no key anywhere: not encrypted", []corev1.Node{node("n1", "", ""), node("n2", "", "")}, verdictSkip, []string{"not encrypted"}},
		{"every node's backend", []corev1.Node{node("n2", "bbbbbbbbbbbb=", "kernel"), node("n1", "aaaaaaaaaaaa=", "userspace")}, verdictPass,
			[]string{"WireGuard on every node", "n1 userspace (key aaaaaaaa…)", "n2 kernel (key bbbbbbbb…)"}},
		{"a node without a key fails, named", []corev1.Node{node("n1", "aaaaaaaaaaaa=", "userspace"), node("n2", "", "")}, verdictFail,
			[]string{"n2 publish no key", "n1 userspace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := encryptionCheck(tc.nodes)
			if r.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s (%s)", r.Verdict, tc.verdict, r.Detail)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Detail, w) {
					t.Errorf("detail %q lacks %q", r.Detail, w)
				}
			}
		})
	}
}
