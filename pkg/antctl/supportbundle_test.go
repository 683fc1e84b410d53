package antctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/supportbundle"
)

func bundlePod(name, component, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: antreaNamespace, Name: name, Labels: map[string]string{componentLabel: component}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: component, Image: "antrea/" + component + ":v9.9.9"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// From a laptop: node-1's agent answers the exec with its bundle, node-2's
// does not; the bundles of the controller and node-1 are written with the
// pod logs added, and the run ends naming node-2.
func TestSupportBundleFinishesWithoutAnUnreachableAgent(t *testing.T) {
	c := defaultCluster()
	c.Pods = append(c.Pods, bundlePod("antrea-agent-a", agentDaemonSet, "node-1"), bundlePod("antrea-agent-b", agentDaemonSet, "node-2"),
		bundlePod("antrea-controller-x", controllerName, "node-1"))
	var execs []string
	saved := execInPod
	defer func() { execInPod = saved }()
	execInPod = func(*options) podExec {
		return func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
			execs = append(execs, ns+"/"+pod+"/"+container+": "+strings.Join(argv, " "))
			if pod == "antrea-agent-b" {
				io.WriteString(stderr, "error: unable to upgrade connection: dial tcp 172.30.0.12:10250: connect: no route to host\n")
				return errors.New("command terminated with exit code 1")
			}
			col := &supportbundle.Collector{Component: "antrea-agent", Node: "node-1", Version: "v9.9.9",
				Funcs: []supportbundle.Func{{Name: "ovs/flows.txt", Write: func(_ context.Context, w io.Writer) error {
					_, err := io.WriteString(w, "table=0, n_packets=1, n_bytes=60, priority=0 actions=drop\n")
					return err
				}}}}
			_, err := col.Collect(ctx, stdout)
			return err
		}
	}
	dir := t.TempDir()
	r := runAntctl(t, c, "supportbundle", "--dir", dir)
	if r.runErr == nil || r.runErr.Error() != "supportbundle: could not collect from antrea-agent on node-2 (the others are in "+dir+")" {
		t.Fatalf("error %v, want the one naming node-2's agent", r.runErr)
	}
	if len(execs) != 2 || !strings.Contains(execs[0]+execs[1], "kube-system/antrea-agent-a/antrea-agent: antctl supportbundle --local") {
		t.Errorf("execs %v", execs)
	}
	if !strings.Contains(r.out, "FAILED: agent pod antrea-agent-b: command terminated with exit code 1: error: unable to upgrade connection") {
		t.Errorf("the summary does not say why node-2 failed:\n%s", r.out)
	}
	for _, f := range []string{"agent-node-1.tar.gz", "controller.tar.gz", "summary.txt", "summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "agent-node-2.tar.gz")); err == nil {
		t.Errorf("a bundle of the unreachable node-2 was written")
	}
	f, err := os.Open(filepath.Join(dir, "agent-node-1.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := supportbundle.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"ovs/flows.txt", "pod-logs/antrea-agent.log", "pod-logs/antrea-ovs.log", "kubernetes/pod.yaml", supportbundle.SummaryName} {
		if _, ok := entries[e]; !ok {
			t.Errorf("node-1's bundle lacks %s", e)
		}
	}
	var sum supportbundle.Summary
	if err := json.Unmarshal(entries[supportbundle.SummaryName], &sum); err != nil {
		t.Fatal(err)
	}
	// No agent API in this test: the profiles are recorded as missing.
	missing := map[string]bool{}
	for _, it := range sum.Failed() {
		missing[it.Name] = true
	}
	if !missing["profiles/goroutine.txt"] || !missing["profiles/heap.pb.gz"] || len(sum.Items) != 7 {
		t.Errorf("summary items %+v", sum.Items)
	}
	cf, err := os.ReadFile(filepath.Join(dir, "controller.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	ce, err := supportbundle.Read(bytes.NewReader(cf))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ce["controlplane/networkpolicies.yaml"], []byte(npWeb.Name)) || !bytes.Contains(ce["version.txt"], []byte("antrea/antrea-controller:v9.9.9")) {
		t.Errorf("controller bundle: %s / %s", ce["controlplane/networkpolicies.yaml"], ce["version.txt"])
	}
}

func TestSupportBundleBadInput(t *testing.T) {
	c := defaultCluster()
	r := runAntctl(t, c, "supportbundle", "--nodes", "node-1,nod-2", "--dir", t.TempDir())
	if r.runErr == nil || r.runErr.Error() != `node "nod-2" not found (did you mean "node-2"?)` {
		t.Errorf("--nodes nod-2: %v", r.runErr)
	}
	r = runAntctl(t, c, "supportbundle", "--local")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), "--local makes the bundle of the node it runs on") {
		t.Errorf("--local outside the agent container: %v", r.runErr)
	}
}
