package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/ui"
	"antrea.io/antrea/test/labtest"
)

// TestTheWebUIOpensThroughAntctlUI: the web UI as a new user meets it on
// the lab. Unless the lab runs with --ui, the test applies
// build/yamls/antrea-ui.yml itself (the lab built the antrea-ui image with
// the others) and deletes it afterwards. Then `antctl ui` opens a
// port-forward and prints the URL; the page loads, the initial password
// from the Secret logs in, and the Summary shows every Node's agent
// healthy; the Pipeline page of a Node has its packet counts from that
// Node's agent API. With the Flow Aggregator (ANTREA_LAB_FLOW_AGGREGATOR=1),
// a client Pod calling a server Pod on the other Node shows on the Flows
// page's map.
func TestTheWebUIOpensThroughAntctlUI(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !e.Opts.UI {
		manifest := filepath.Join(e.Opts.BinDir, "..", "build", "yamls", lab.UIManifestName)
		if out, errOut, err := e.Kubectl(ctx, "apply", "-f", manifest); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s%s", manifest, err, out, errOut)
		}
		t.Cleanup(func() {
			dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
			defer dcancel()
			if out, errOut, err := e.Kubectl(dctx, "delete", "--wait", "-f", manifest); err != nil {
				t.Errorf("kubectl delete -f %s: %v\n%s%s", manifest, err, out, errOut)
			}
			_ = e.Client.CoreV1().Secrets(lab.AntreaNamespace).Delete(dctx, ui.DefaultSecretName, metav1.DeleteOptions{})
		})
	}
	start := time.Now()
	labtest.WaitFor(t, ctx, "the antrea-ui Deployment available", func() error {
		d, err := e.Client.AppsV1().Deployments(lab.AntreaNamespace).Get(ctx, lab.UIDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("%d replicas available", d.Status.AvailableReplicas)
		}
		return nil
	})
	if !e.Opts.UI {
		t.Logf("antrea-ui available %.1fs after kubectl apply", time.Since(start).Seconds())
	}

	// antctl ui, as a user runs it; it prints the URL and forwards until
	// interrupted.
	cmd := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antctl"), "--kubeconfig", e.Opts.KubeconfigPath(), "ui")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
		for sc.Scan() {
			if u := re.FindString(sc.Text()); u != "" {
				urls <- u
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("antctl ui printed no URL in 30 s")
	}
	base = strings.TrimSuffix(base, "/")

	get := func(path, cookie string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: ui.SessionCookie, Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, page := get("/", ""); code != 200 || !strings.Contains(string(page), "/assets/main.js") {
		t.Fatalf("the page through antctl ui: %d %.200s", code, page)
	}
	sec, err := e.Client.CoreV1().Secrets(lab.AntreaNamespace).Get(ctx, ui.DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the admin Secret the UI creates: %v", err)
	}
	pw := string(sec.Data[ui.InitialPasswordKey])
	if pw == "" {
		t.Fatalf("Secret %s has no %s", ui.DefaultSecretName, ui.InitialPasswordKey)
	}
	body, _ := json.Marshal(map[string]string{"password": pw})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/login", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == ui.SessionCookie {
			cookie = c.Value
		}
	}
	if resp.StatusCode != 200 || cookie == "" {
		t.Fatalf("login with the initial password: %s", resp.Status)
	}

	var sum ui.Summary
	labtest.WaitFor(t, ctx, "every agent healthy on the Summary", func() error {
		code, b := get("/api/v1/summary", cookie)
		if code != 200 {
			return fmt.Errorf("GET /api/v1/summary: %d %s", code, b)
		}
		if err := json.Unmarshal(b, &sum); err != nil {
			return err
		}
		healthy := 0
		for _, a := range sum.Agents {
			if a.Healthy {
				healthy++
			}
		}
		if sum.Controller == nil || !sum.Controller.Healthy || healthy != len(e.Nodes) {
			return fmt.Errorf("controller %v, %d of %d agents healthy", sum.Controller != nil && sum.Controller.Healthy, healthy, len(e.Nodes))
		}
		return nil
	})

	code, b := get("/api/v1/pipeline?node="+e.Nodes[0], cookie)
	var pl ui.PipelineView
	if code != 200 || json.Unmarshal(b, &pl) != nil {
		t.Fatalf("GET /api/v1/pipeline: %d %.300s", code, b)
	}
	if !pl.Live || !strings.Contains(pl.SVG, " pkts</text>") {
		t.Errorf("pipeline of %s: live %v (%s), want packet counts from its agent API", e.Nodes[0], pl.Live, pl.Note)
	}

	if !e.Opts.FlowVisibility {
		t.Logf("the lab runs without the Flow Aggregator (%s=1 adds it): the Flows page's map is not checked", labtest.EnvFlowAggregator)
		return
	}
	// A client on node 1 calls a server on node 2 until the Flows page
	// maps the pair, from the Flow Aggregator's records.
	ns, _ := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		c := corev1.Container{Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent}
		node := e.Nodes[0]
		if name == "server" {
			node = e.Nodes[len(e.Nodes)-1]
			c.Args = []string{"netexec", "--http-port=8080"}
		} else {
			c.Args = []string{"pause"}
		}
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}}
	}, "client", "server")
	srv, err := e.Client.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labtest.WaitFor(t, ctx, "the Flows page maps client → server", func() error {
		if _, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "curl", "-s", "-m", "3",
			"http://"+srv.Status.PodIP+":8080/hostname"); err != nil {
			return fmt.Errorf("curl: %w: %s", err, stderr)
		}
		code, b := get("/api/v1/flows", cookie)
		var f ui.FlowsView
		if code != 200 || json.Unmarshal(b, &f) != nil {
			return fmt.Errorf("GET /api/v1/flows: %d %.300s", code, b)
		}
		for _, edge := range f.Edges {
			if edge.From == ns+"/client" && edge.To == ns+"/server" && edge.Port == "TCP/8080" && !edge.Denied {
				return nil
			}
		}
		return fmt.Errorf("available %v, %d records, no edge %s/client → %s/server: %s", f.Available, f.Records, ns, ns, f.Message)
	})
}
