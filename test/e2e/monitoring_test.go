package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

func gauge(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return 0, false
	}
	if g := f.Metric[0].Gauge; g != nil {
		return g.GetValue(), true
	}
	if c := f.Metric[0].Counter; c != nil {
		return c.GetValue(), true
	}
	return 0, false
}

func agentCondition(info *crdv1beta1.AntreaAgentInfo, t crdv1beta1.AgentConditionType) crdv1beta1.AgentCondition {
	for _, c := range info.AgentConditions {
		if c.Type == t {
			return c
		}
	}
	return crdv1beta1.AgentCondition{}
}

// TestMonitoring, on the lab: every node's agent keeps an AntreaAgentInfo
// whose OVS version is ovs_version of that node's OVSDB, whose conditions
// are True and whose heartbeat moves; kubectl get antreaagentinfos shows
// both nodes with their heartbeat age; the controller's AntreaControllerInfo
// counts both agents; the agents' and the controller's /metrics, scraped
// with a ServiceAccount token bound to antrea-metrics-reader, parse and
// agree with the AntreaAgentInfo (local pods) while anonymous scrapes get
// 403; antctl reaches a node's agent API from the control-plane machine.
// It also measures what scraping costs the agent (logged, not asserted).
func TestMonitoring(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	crd := versioned.NewForConfigOrDie(e.Config).CrdV1beta1()

	// Two pods on the first node, so its local pod count is known to move.
	ns := "mon-" + strconv.FormatInt(time.Now().UnixNano()%1000000, 10)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for _, name := range []string{"m-0", "m-1"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: e.Nodes[0],
			Containers: []corev1.Container{{Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"netexec", "--http-port=80"}}}}}
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"m-0", "m-1"}); err != nil {
		t.Fatal(err)
	}
	// The pods with an interface on a node: its pods not on the host network.
	podsOn := func(node string) int {
		list, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range list.Items {
			if !p.Spec.HostNetwork && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}

	infos := map[string]*crdv1beta1.AntreaAgentInfo{}
	t.Run("every node's AntreaAgentInfo holds its OVS and pods, conditions True", func(t *testing.T) {
		for _, node := range e.Nodes {
			out, err := exec.CommandContext(ctx, "ovs-vsctl", "--db=unix:"+filepath.Join(e.OVSDir(node), "db.sock"),
				"get", "Open_vSwitch", ".", "ovs_version").Output()
			if err != nil {
				t.Fatalf("ovs-vsctl on %s: %v", node, err)
			}
			ovsVersion := strings.Trim(strings.TrimSpace(string(out)), `"`)
			var info *crdv1beta1.AntreaAgentInfo
			// The pod count moved: the agent refreshes within about 10 s
			// (pkg/agent/monitor), not at the next heartbeat (60 s).
			labtest.WaitFor(t, ctx, "AntreaAgentInfo "+node+" with its local pods", func() error {
				i, err := crd.AntreaAgentInfos().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if want := podsOn(node); int(i.LocalPodNum) != want {
					return fmt.Errorf("localPodNum %d, the node has %d pods", i.LocalPodNum, want)
				}
				// The conditions are True once the agent settled: a
				// refresh may fall while its watches of the controller
				// re-open (TestKubectlDeleteRemovesAntreaAndKubectlApplyBringsItBack
				// replaced the controller), and then it checks again in 10 s.
				for _, ct := range []crdv1beta1.AgentConditionType{crdv1beta1.AgentHealthy, crdv1beta1.ControllerConnectionUp,
					crdv1beta1.OVSDBConnectionUp, crdv1beta1.OpenflowConnectionUp} {
					if c := agentCondition(i, ct); c.Status != corev1.ConditionTrue {
						return fmt.Errorf("condition %s = %+v", ct, c)
					}
				}
				info = i
				return nil
			})
			if info.OVSInfo.Version != ovsVersion || info.OVSInfo.BridgeName != "br-int" || len(info.OVSInfo.FlowTable) == 0 ||
				info.NodeRef.Name != node || info.PodRef.Name == "" || len(info.NodeSubnets) == 0 || info.APIPort != 10350 {
				t.Errorf("AntreaAgentInfo %s = %+v; OVSDB says ovs_version %q", node, info, ovsVersion)
			}
			infos[node] = info
		}
	})
	t.Run("the controller counts every agent", func(t *testing.T) {
		// The heartbeat comes every 60 s: TestAgentHeartbeatsMove checks
		// the next one near the end of the package instead of waiting here.
		for _, node := range e.Nodes {
			firstHeartbeats[node] = agentCondition(infos[node], crdv1beta1.AgentHealthy).LastHeartbeatTime.Time
		}
		// The controller's refresh after the agents connected counts them
		// (every agent watches its slice of the NetworkPolicies).
		labtest.WaitFor(t, ctx, "AntreaControllerInfo counting every agent", func() error {
			ci, err := crd.AntreaControllerInfos().Get(ctx, "antrea-controller", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if int(ci.ConnectedAgentNum) < len(e.Nodes) || len(ci.ControllerConditions) == 0 ||
				ci.ControllerConditions[0].Status != corev1.ConditionTrue {
				return fmt.Errorf("connectedAgentNum %d, conditions %+v; want >= %d agents and ControllerHealthy",
					ci.ConnectedAgentNum, ci.ControllerConditions, len(e.Nodes))
			}
			return nil
		})
	})
	t.Run("kubectl get antreaagentinfos shows both nodes with a heartbeat age", func(t *testing.T) {
		out, stderr, err := e.Kubectl(ctx, "get", "antreaagentinfos")
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		t.Logf("kubectl get antreaagentinfos:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(lines[0], "LAST HEARTBEAT") || !strings.Contains(lines[0], "HEALTHY") || len(lines) != len(e.Nodes)+1 {
			t.Fatalf("want a HEALTHY and LAST HEARTBEAT header and a row per node:\n%s", out)
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) < 3 || f[1] != "True" || !regexpAge.MatchString(f[2]) {
				t.Errorf("row %q: want True and a heartbeat age", l)
			}
		}
	})

	// A scraper's identity: a ServiceAccount bound to antrea-metrics-reader.
	token, unbind, err := labtest.MetricsReaderToken(ctx, e.Client, ns, "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unbind)
	nodeIP := map[string]string{}
	for _, node := range e.Nodes {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIP[node] = a.Address
			}
		}
	}

	t.Run("agents' and controller's /metrics parse and agree", func(t *testing.T) {
		for _, node := range e.Nodes {
			url := "https://" + nodeIP[node] + ":10350/metrics"
			var fams map[string]*dto.MetricFamily
			labtest.WaitFor(t, ctx, "the metrics of "+node, func() error {
				code, body, err := labtest.Scrape(ctx, url, token)
				if err != nil {
					return err
				}
				if code != 200 {
					return fmt.Errorf("GET %s: %d %.200s", url, code, body)
				}
				fams = parseMetrics(t, body)
				if v, _ := gauge(fams, "antrea_agent_local_pod_count"); int(v) != podsOn(node) {
					return fmt.Errorf("antrea_agent_local_pod_count %v, the node has %d pods", v, podsOn(node))
				}
				return nil
			})
			total, _ := gauge(fams, "antrea_agent_ovs_total_flow_count")
			sum := 0.0
			for _, m := range fams["antrea_agent_ovs_flow_count"].GetMetric() {
				sum += m.GetGauge().GetValue()
			}
			if total == 0 || sum != total {
				t.Errorf("%s: antrea_agent_ovs_total_flow_count %v, per-table sum %v", node, total, sum)
			}
			if adds := fams["antrea_agent_ovs_flow_ops_count"]; adds == nil {
				t.Errorf("%s: no antrea_agent_ovs_flow_ops_count", node)
			}
			if code, body, err := labtest.Scrape(ctx, url, ""); err != nil || code != 403 {
				t.Errorf("%s: anonymous /metrics: %d %v %.200s, want 403", node, code, err, body)
			}
		}
		pods, err := e.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=antrea-controller"})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("antrea-controller pod: %v %d", err, len(pods.Items))
		}
		url := "https://" + pods.Items[0].Status.PodIP + ":10349/metrics"
		code, body, err := labtest.Scrape(ctx, url, token)
		if err != nil || code != 200 {
			t.Fatalf("controller /metrics: %d %v %.200s", code, err, body)
		}
		fams := parseMetrics(t, body)
		for _, name := range []string{"antrea_controller_network_policy_processed", "antrea_controller_network_policy_count",
			"antrea_controller_length_network_policy_queue"} {
			if _, ok := gauge(fams, name); !ok {
				t.Errorf("controller: no %s", name)
			}
		}
	})
	t.Run("antctl from the control-plane machine reads a node through its agent API", func(t *testing.T) {
		antctl := filepath.Join(e.Opts.BinDir, "antctl")
		out, stderr, err := labtest.InControlPlane(ctx, antctl, "--kubeconfig", e.Opts.KubeconfigPath(), "get", "podinterface", "-n", ns, "--node", e.Nodes[0])
		if err != nil || !strings.Contains(out, "m-0") || !strings.Contains(out, "m-1") {
			t.Errorf("antctl get podinterface --node %s: %v %s\n%s", e.Nodes[0], err, stderr, out)
		}
		out, stderr, err = labtest.InControlPlane(ctx, antctl, "--kubeconfig", e.Opts.KubeconfigPath(), "get", "ovsflows", "-p", "m-1", "-n", ns)
		if err != nil || !strings.Contains(out, "cookie=") {
			t.Errorf("antctl get ovsflows -p m-1: %v %s\n%s", err, stderr, out)
		}
	})
	if os.Getenv("ANTREA_E2E_MEASURE") != "" {
		t.Run("cost of scraping the agent (measured)", func(t *testing.T) { measureScrapeCost(t, ctx, e, nodeIP[e.Nodes[0]], token) })
	}
}

var regexpAge = regexp.MustCompile(`^[0-9]+[smhd]`)

// measureScrapeCost reads the agent process of the first node from /proc
// (utime+stime of /proc/PID/stat, VmRSS of /proc/PID/status) over a minute
// without scrapes, then a minute with /metrics and /agentinfo scraped every
// 5 s, and logs both.
func measureScrapeCost(t *testing.T, ctx context.Context, e *labEnv, ip, token string) {
	pid := agentPID(t, e.Nodes[0])
	ticks := func() (float64, int) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		rss := 0
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				rss, _ = strconv.Atoi(strings.Fields(l)[1])
			}
		}
		return (ut + st) * 10, rss // ms (USER_HZ 100), kB
	}
	window := func(scrapes bool) (float64, int, int) {
		c0, _ := ticks()
		deadline := time.Now().Add(time.Minute)
		maxRSS := 0
		for time.Now().Before(deadline) {
			if scrapes {
				_, _, _ = labtest.Scrape(ctx, "https://"+ip+":10350/metrics", token)
				_, _, _ = labtest.Scrape(ctx, "https://"+ip+":10350/agentinfo", token)
			}
			if _, r := ticks(); r > maxRSS {
				maxRSS = r
			}
			time.Sleep(5 * time.Second)
		}
		c1, r := ticks()
		return c1 - c0, r, maxRSS
	}
	idleCPU, idleRSS, idleMax := window(false)
	scrapeCPU, scrapeRSS, scrapeMax := window(true)
	t.Logf("agent PID %d on %s: idle minute CPU %.0f ms (%.2f%%), RSS %d kB (max %d); scraped every 5 s: CPU %.0f ms (%.2f%%), RSS %d kB (max %d); per scrape of /metrics+/agentinfo: %.1f ms CPU",
		pid, e.Nodes[0], idleCPU, idleCPU/600, idleRSS, idleMax, scrapeCPU, scrapeCPU/600, scrapeRSS, scrapeMax, (scrapeCPU-idleCPU)/12)
}

// agentPID finds the antrea-agent process of node (its environment names
// the node).
func agentPID(t *testing.T, node string) int {
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv := strings.Split(string(cmd), "\x00")
		if len(argv) == 0 || filepath.Base(argv[0]) != "antrea-agent" {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if bytes.Contains(env, []byte("NODE_NAME="+node+"\x00")) {
			return pid
		}
	}
	t.Fatalf("no antrea-agent process of %s", node)
	return 0
}
