package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestAntreaRunsOnEveryNodeFromItsManifestAsContainers checks that the lab
// installed Antrea as a user does, from build/yamls/antrea.yml: the agent
// DaemonSet's pod on every node (install-cni done, antrea-agent and antrea-ovs
// ready), the controller Deployment available, no Antrea process left to the
// lab's supervisor, the CNI plugin and conflist where kubelet's runtime looks,
// and a manifest that differs from the repository's only in the conf files.
func TestAntreaRunsOnEveryNodeFromItsManifestAsContainers(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("every node runs an antrea-agent pod with install-cni done and antrea-agent and antrea-ovs ready", func(t *testing.T) {
		ds, err := e.Client.AppsV1().DaemonSets(lab.AntreaNamespace).Get(ctx, lab.AgentDaemonSet, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods := podsOf(t, ctx, e, ds.Spec.Selector)
		onNode := map[string]bool{}
		for _, p := range pods {
			onNode[p.Spec.NodeName] = true
			if !labtest.PodReady(&p) {
				t.Errorf("pod %s on %s is not Ready: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			if !p.Spec.HostNetwork {
				t.Errorf("pod %s should use the node's network", p.Name)
			}
			for _, c := range p.Status.InitContainerStatuses {
				if term := c.State.Terminated; c.Name != "install-cni" || term == nil || term.ExitCode != 0 {
					t.Errorf("pod %s: init container %s: %+v", p.Name, c.Name, c.State)
				}
			}
			ready := map[string]bool{}
			for _, c := range p.Status.ContainerStatuses {
				ready[c.Name] = c.Ready
			}
			if !ready["antrea-agent"] || !ready["antrea-ovs"] || len(ready) != 2 {
				t.Errorf("pod %s: containers ready %v, want antrea-agent and antrea-ovs", p.Name, ready)
			}
		}
		for _, n := range e.Nodes {
			if !onNode[n] {
				t.Errorf("no antrea-agent pod on %s", n)
			}
		}
	})

	t.Run("the antrea-controller Deployment is available and serves the controlplane API", func(t *testing.T) {
		d, err := e.Client.AppsV1().Deployments(lab.AntreaNamespace).Get(ctx, lab.ControllerDeployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.AvailableReplicas != 1 {
			t.Errorf("antrea-controller: %d available replicas, want 1", d.Status.AvailableReplicas)
		}
		out, stderr, err := e.Kubectl(ctx, "get", "networkpolicies.controlplane.antrea.io")
		if err != nil {
			t.Errorf("kubectl get networkpolicies.controlplane.antrea.io: %v: %s%s", err, out, stderr)
		}
	})

	t.Run("antrea-agent and ovs-vswitchd run in containers, not as daemons of the lab", func(t *testing.T) {
		st, err := lab.LoadState(e.Opts.StatePath())
		if err != nil || st == nil {
			t.Fatalf("lab state: %v", err)
		}
		for _, p := range st.Processes {
			switch p.Component {
			case "antrea-agent", "antrea-controller", "ovs-vswitchd", "ovsdb-server":
				t.Errorf("the supervisor runs %s on %q itself (pid %d)", p.Component, p.Node, p.PID)
			}
		}
		for _, n := range e.Nodes {
			for _, comm := range []string{"antrea-agent", "ovs-vswitchd", "ovsdb-server"} {
				procs, err := lab.NodeProcesses(e.Opts, n, comm)
				if err != nil {
					t.Fatal(err)
				}
				if len(procs) != 1 {
					t.Errorf("%s: %d %s processes, want 1", n, len(procs), comm)
					continue
				}
				cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", procs[0].PID))
				if !strings.Contains(string(cg), "kubepods") {
					t.Errorf("%s: %s (pid %d) is not in a pod's cgroup:\n%s", n, comm, procs[0].PID, cg)
				}
			}
		}
	})

	t.Run("install-cni put the antrea plugin and its conflist where the node's containerd looks", func(t *testing.T) {
		for _, n := range e.Nodes {
			plugin := filepath.Join(e.NodeHostPath(n, "/opt/cni/bin"), "antrea")
			if fi, err := os.Stat(plugin); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s: plugin %s: %v", n, plugin, err)
			}
			confs, _ := filepath.Glob(filepath.Join(e.NodeHostPath(n, "/etc/cni/net.d"), "*"))
			if len(confs) != 1 {
				t.Errorf("%s: CNI conf dir holds %v, want one conflist", n, confs)
				continue
			}
			var conf struct {
				Name    string `json:"name"`
				Plugins []struct {
					Type string `json:"type"`
				} `json:"plugins"`
			}
			data, err := os.ReadFile(confs[0])
			if err == nil {
				err = json.Unmarshal(data, &conf)
			}
			if err != nil || len(conf.Plugins) == 0 || conf.Plugins[0].Type != "antrea" {
				t.Errorf("%s: %s: %v: %s", n, confs[0], err, data)
			}
		}
	})

	t.Run("the applied manifest is the repository's with the lab's conf keys only", func(t *testing.T) {
		src, err := os.ReadFile(e.Opts.SourceManifest())
		if err != nil {
			t.Fatal(err)
		}
		applied, err := os.ReadFile(e.Opts.AppliedManifest())
		if err != nil {
			t.Fatal(err)
		}
		srcDocs, appliedDocs := yamlDocs(t, src), yamlDocs(t, applied)
		if len(srcDocs) != len(appliedDocs) {
			t.Fatalf("%d objects applied, the manifest has %d", len(appliedDocs), len(srcDocs))
		}
		for i := range srcDocs {
			if srcDocs[i].id() != appliedDocs[i].id() {
				t.Fatalf("object %d: applied %s, manifest %s", i, appliedDocs[i].id(), srcDocs[i].id())
			}
			if srcDocs[i].id() == "ConfigMap/antrea-config" {
				continue
			}
			if !bytes.Equal(srcDocs[i].canonical, appliedDocs[i].canonical) {
				t.Errorf("%s differs from the manifest's", srcDocs[i].id())
			}
		}
	})

	t.Run("antrea-lab logs shows the agent's log from its container", func(t *testing.T) {
		out, err := e.Cmd(ctx, "logs", "antrea-agent", "--node", "1")
		if err != nil || !strings.Contains(out, "Agent ready") {
			t.Errorf("antrea-lab logs antrea-agent --node 1: %v\n%.2000s", err, out)
		}
	})
}

// TestAnAgentConfWithABadValueFailsTheAgentWithALineNamingTheKey runs the
// agent image with a conf file holding a bad value, in a pod of its own (the
// lab's agents stay as they are): the container must fail at once, saying
// which key is wrong.
func TestAnAgentConfWithABadValueFailsTheAgentWithALineNamingTheKey(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "e2e-badconf"
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if err := labtest.WaitDefaultServiceAccount(ctx, e.Client, ns); err != nil {
		t.Fatal(err)
	}
	ds, err := e.Client.AppsV1().DaemonSets(lab.AntreaNamespace).Get(ctx, lab.AgentDaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := containerImage(t, ds, "antrea-agent")
	for _, tc := range []struct{ name, conf, key string }{
		{"an unsupported tunnel type", "tunnelType: stt\n", "tunnelType"},
		{"a misspelt key", "tunelType: vxlan\n", "tunelType"},
		{"a datapath type that does not exist", "ovsDatapathType: kernel\n", "ovsDatapathType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "badconf-" + strings.ToLower(tc.key)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data: map[string]string{"antrea-agent.conf": tc.conf}}
			if _, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "antrea-agent", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:      []string{"antrea-agent", "--config", "/etc/antrea/antrea-agent.conf"},
						Env:          []corev1.EnvVar{{Name: "NODE_NAME", Value: "node-1"}},
						VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/antrea"}},
					}},
					Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
				},
			}
			if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var term *corev1.ContainerStateTerminated
			labtest.WaitFor(t, ctx, "the agent of pod "+name+" to exit", func() error {
				p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, c := range p.Status.ContainerStatuses {
					if c.State.Terminated != nil {
						term = c.State.Terminated
						return nil
					}
				}
				return fmt.Errorf("phase %s", p.Status.Phase)
			})
			if term.ExitCode == 0 {
				t.Errorf("the agent exited 0 with %q", tc.conf)
			}
			logs, stderr, err := e.Kubectl(ctx, "-n", ns, "logs", name)
			if err != nil {
				t.Fatalf("kubectl logs: %v: %s", err, stderr)
			}
			if !strings.Contains(logs, tc.key) || !strings.Contains(logs, "antrea-agent.conf") {
				t.Errorf("the agent's log should name antrea-agent.conf and %s:\n%s", tc.key, logs)
			}
		})
	}
}

// podsOf lists the pods of a workload's selector in Antrea's namespace.
func podsOf(t *testing.T, ctx context.Context, e *labEnv, sel *metav1.LabelSelector) []corev1.Pod {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.Client.CoreV1().Pods(lab.AntreaNamespace).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// containerImage is the image of a DaemonSet's container.
func containerImage(t *testing.T, ds *appsv1.DaemonSet, name string) string {
	t.Helper()
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	t.Fatalf("DaemonSet %s has no container %s", ds.Name, name)
	return ""
}

// manifestDoc is one object of a manifest, in a canonical JSON form.
type manifestDoc struct {
	kind, name string
	canonical  []byte
}

func (d manifestDoc) id() string { return d.kind + "/" + d.name }

func yamlDocs(t *testing.T, data []byte) []manifestDoc {
	t.Helper()
	var out []manifestDoc
	for _, raw := range strings.Split("\n"+string(data), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(raw), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		canonical, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		kind, _ := obj["kind"].(string)
		out = append(out, manifestDoc{kind: kind, name: name, canonical: canonical})
	}
	return out
}

// TestKubectlDeleteRemovesAntreaAndKubectlApplyBringsItBack uninstalls Antrea
// as a user does (`kubectl delete -f`): its pods go, each node's CNI conflist
// and plugin are removed (kubelet then reports the network not ready), and
// with the userspace datapath the node keeps its address. Applying the same
// manifest installs it again, and pods are networked across nodes; the tests
// after this one run on that second installation. It runs under
// ANTREA_RELIABILITY (make reliability), out of make test's budget.
func TestKubectlDeleteRemovesAntreaAndKubectlApplyBringsItBack(t *testing.T) {
	e := requireReal(t)
	if os.Getenv("ANTREA_RELIABILITY") == "" {
		t.Skip("an uninstall and a reinstall (about 40 s): runs under ANTREA_RELIABILITY=1 (make reliability)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	manifest := e.Opts.AppliedManifest()
	if out, stderr, err := e.Kubectl(ctx, "delete", "-f", manifest, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl delete -f %s: %v\n%s%s", manifest, err, out, stderr)
	}
	reinstalled := false
	t.Cleanup(func() {
		if !reinstalled { // leave the lab usable for the tests after this one
			_, _, _ = e.Kubectl(context.Background(), "apply", "-f", manifest)
		}
	})
	labtest.WaitFor(t, ctx, "Antrea's pods to be gone", func() error {
		pods, err := e.Client.CoreV1().Pods(lab.AntreaNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=antrea"})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	for _, n := range e.Nodes {
		for _, f := range []string{filepath.Join(e.NodeHostPath(n, "/etc/cni/net.d"), "10-antrea.conflist"),
			filepath.Join(e.NodeHostPath(n, "/opt/cni/bin"), "antrea")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s: %s is still there after the uninstall", n, f)
			}
		}
	}
	labtest.WaitFor(t, ctx, "kubelet to report the nodes' network not ready", func() error {
		for _, n := range e.Nodes {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return fmt.Errorf("%s is still Ready", n)
				}
			}
		}
		return nil
	})

	applied := time.Now()
	if out, stderr, err := e.Kubectl(ctx, "apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s%s", manifest, err, out, stderr)
	}
	reinstalled = true
	for _, w := range []string{"daemonset/" + lab.AgentDaemonSet, "deployment/" + lab.ControllerDeployment} {
		if out, stderr, err := e.Kubectl(ctx, "-n", lab.AntreaNamespace, "rollout", "status", w, "--timeout=120s"); err != nil {
			t.Fatalf("kubectl rollout status %s: %v\n%s%s", w, err, out, stderr)
		}
	}
	labtest.WaitFor(t, ctx, "the nodes and the controlplane API to be back", func() error {
		for _, n := range e.Nodes {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return fmt.Errorf("%s is not Ready", n)
			}
		}
		_, stderr, err := e.Kubectl(ctx, "get", "networkpolicies.controlplane.antrea.io")
		if err != nil {
			return fmt.Errorf("controlplane API: %v: %s", err, stderr)
		}
		return nil
	})
	t.Logf("reinstall: every Antrea pod ready, nodes Ready and the controlplane API served %.1fs after kubectl apply",
		time.Since(applied).Seconds())
	ns, pods := testPods(t, e, ctx)
	t.Logf("reinstall: %d new pods networked and Ready %.1fs after kubectl apply", len(pods), time.Since(applied).Seconds())
	// Each pair gets 30 s: a fresh installation may lose the first packets
	// between two nodes while their tunnel neighbours are learned again (the
	// node addresses moved from br-phy to eth0 and back).
	for _, src := range pods {
		for _, dst := range pods {
			if src.Name == dst.Name {
				continue
			}
			start := time.Now()
			var out string
			var err error
			for attempt := 0; time.Since(start) < 30*time.Second; attempt++ {
				out, err = e.Exec(ctx, ns, src.Name, "antrea-testpod", "connect", "--protocol", "tcp",
					"--to", dst.Status.PodIP+":80", "--timeout", "2s")
				if err == nil && strings.Contains(out, dst.Name) {
					if attempt > 0 {
						t.Logf("after reinstalling, %s (%s) reached %s (%s) after %d failed attempts (%.1fs)", src.Name,
							src.Spec.NodeName, dst.Name, dst.Spec.NodeName, attempt, time.Since(start).Seconds())
					}
					break
				}
			}
			if err != nil || !strings.Contains(out, dst.Name) {
				t.Errorf("after reinstalling, %s (%s) to %s (%s) for 30 s: %v: %s", src.Name, src.Spec.NodeName, dst.Name, dst.Spec.NodeName, err, out)
			}
		}
	}
}
