package ui

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// The browser test: Debian's chromium, headless, driven by chromedp,
// against the real antrea-ui binary (built here) on the cluster of
// cluster_test.go. With ANTREA_UI_SCREENSHOTS=1 it saves a PNG of each page
// into docs/ui/.

// chromiumPath finds the browser, or skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium in PATH: the browser test needs Debian's chromium (apt-get install chromium; hack/install.sh installs it for make test)")
	return ""
}

// startBinary builds cmd/antrea-ui and runs it with kubeconfig; it returns
// its URL and PID, and stops it at cleanup.
func startBinary(t *testing.T, kubeconfig []byte, args ...string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "antrea-ui")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go in PATH to build cmd/antrea-ui: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/antrea-ui")
	build.Dir = apiservertest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/antrea-ui: %v\n%s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kc, "--listen", addr, "--v=2"}, args...)...)
	logf, err := os.Create(filepath.Join(dir, "antrea-ui.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("antrea-ui log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("antrea-ui exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("antrea-ui does not listen on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "http://" + addr, cmd.Process.Pid
}

// rssKiB reads a process's resident set size.
func rssKiB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &n); err == nil {
			return n
		}
	}
	return -1
}

// consoleErrors collects what the page logs as an error.
type consoleErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (c *consoleErrors) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, s)
}

func (c *consoleErrors) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.msgs
	c.msgs = nil
	return m
}

func TestTheUIInARealBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	apiservertest.Assets(t)
	cl := startUICluster(t)
	// A Flow Aggregator's API holding the records of an allowed and a
	// denied connection (flows_test.go).
	t0 := time.Now().Add(-time.Minute)
	allowed := demoFlow("client", "web", 40000, 8080, 4200, t0)
	allowed.IngressPolicy = demoNS + "/web-from-client"
	denied := demoFlow("web", "db", 41000, 5432, 0, t0.Add(time.Second))
	denied.Denied, denied.EgressPolicy, denied.EgressPolicyRule = true, denyACNP, denyRule
	agg, _ := aggregatorWith(t, allowed, denied)
	// The admin Secret holds testPassword (startUICluster).
	base, pid := startBinary(t, cl.uiKubeconfig, "--flow-aggregator-url", agg.URL)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, // root in the test container
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(cl.ctx, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelCtx)
	// The console: calls of console.error, uncaught exceptions, the browser
	// log's errors (a failed request, a CSP violation).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	errs := &consoleErrors{}
	consoleCtx, stopConsole := context.WithCancel(ctx)
	messages := chromedp.Console(consoleCtx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				errs.add(m.String() + " " + m.URL)
			}
		}
	}()
	t.Cleanup(func() { stopConsole(); <-consoleDone })
	shots := os.Getenv("ANTREA_UI_SCREENSHOTS") != ""
	shotDir := filepath.Join(apiservertest.RepoRoot(), "docs", "ui")
	shot := func(t *testing.T, name string) {
		t.Helper()
		if !shots {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(shotDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shotDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noErrors := func(t *testing.T, page string) {
		t.Helper()
		if m := errs.take(); len(m) > 0 {
			t.Errorf("%s: the browser logged errors:\n%s", page, strings.Join(m, "\n"))
		}
	}
	run := func(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(tctx, actions...); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("%s: %v\npage text:\n%s", what, err, text)
		}
	}
	// value runs one action that returns a value.
	value := func(t *testing.T, what string, a chromedp.Action[string]) string {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		v, err := chromedp.Run(tctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	var cold, login, warm time.Duration
	if !t.Run("the login page loads (cold) and logs in", func(t *testing.T) {
		start := time.Now()
		run(t, "open", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("#password")))
		cold = time.Since(start)
		shot(t, "login")
		// Keyboard: the password field has the focus, Tab reaches the button.
		if f := value(t, "focused", chromedp.Evaluate[string](`document.activeElement.id`)); f != "password" {
			t.Errorf("on load %q has the focus, want the password field", f)
		}
		run(t, "type", chromedp.KeyEvent(testPassword), chromedp.KeyEvent("\t"))
		if f := value(t, "focused", chromedp.Evaluate[string](`document.activeElement.textContent`)); f != "Log in" {
			t.Errorf("Tab from the password field focuses %q, want the Log in button", f)
		}
		start = time.Now()
		run(t, "log in", chromedp.KeyEvent("\r"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-name="node-1"]`)))
		login = time.Since(start)
		noErrors(t, "login")
	}) {
		t.FailNow()
	}

	t.Run("Summary: the controller and node-1 green, node-2 red", func(t *testing.T) {
		run(t, "summary",
			chromedp.WaitVisible(chromedp.CSS(`tr[data-component="controller"][data-healthy="true"]`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-name="node-1"][data-healthy="true"] .badge.ok`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-name="node-2"][data-healthy="false"] .badge.bad`)))
		text := value(t, "read", chromedp.Text(chromedp.CSS(`tr[data-name="node-2"]`)))
		if !strings.Contains(text, "Unhealthy") || !strings.Contains(text, "last heartbeat") {
			t.Errorf("node-2 row %q: want Unhealthy and why", text)
		}
		// Heading focused for screen readers and keyboard users.
		active := value(t, "focus", chromedp.Evaluate[string](`document.activeElement.tagName`))
		if active != "H1" {
			t.Errorf("after navigation %s has the focus, want the page's h1", active)
		}
		shot(t, "summary")
		start := time.Now()
		run(t, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="node-2"][data-healthy="false"]`)))
		warm = time.Since(start)
		noErrors(t, "summary")
	})

	t.Run("Summary: node-1 turns red once its agent stops heartbeating", func(t *testing.T) {
		info, err := cl.crd.CrdV1beta1().AntreaAgentInfos().Get(cl.ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range info.AgentConditions {
			info.AgentConditions[i].LastHeartbeatTime = metav1.NewTime(time.Now().Add(-5 * time.Minute))
			if info.AgentConditions[i].Type == crdv1beta1.OVSDBConnectionUp {
				info.AgentConditions[i].Status = "False"
				info.AgentConditions[i].Message = "ovsdb-server does not answer"
			}
		}
		if _, err := cl.crd.CrdV1beta1().AntreaAgentInfos().Update(cl.ctx, info, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		run(t, "red", chromedp.Navigate(base+"/#/flows"), chromedp.WaitVisible(chromedp.CSS(`[data-page="flows"]`)),
			chromedp.Navigate(base+"/#/summary"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-name="node-1"][data-healthy="false"] .badge.bad`)))
		text := value(t, "read", chromedp.Text(chromedp.CSS(`tr[data-name="node-1"]`)))
		if !strings.Contains(text, "ovsdb-server does not answer") {
			t.Errorf("node-1 row %q does not say why", text)
		}
		noErrors(t, "summary after the agent stopped")
	})

	t.Run("Traceflow: client to web is dropped, and the rule is named", func(t *testing.T) {
		run(t, "form", chromedp.Navigate(base+"/#/traceflow"),
			chromedp.WaitReady(chromedp.CSS(`#tf-src option[value="demo/client"]`)),
			chromedp.SetValue(chromedp.ID("#tf-src"), "demo/client"),
			chromedp.SetValue(chromedp.ID("#tf-dst"), "demo/web"),
			chromedp.SetValue(chromedp.ID("#tf-proto"), "TCP"),
			chromedp.SendKeys(chromedp.ID("#tf-port"), "80"),
			chromedp.Click(chromedp.CSS(`.tf-form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.ID("#tf-verdict")))
		verdict := value(t, "verdict", chromedp.Text(chromedp.ID("#tf-verdict")))
		dropBoxes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`#traceflow-result svg g.box.drop`)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(verdict, "Dropped") || !strings.Contains(verdict, denyRule) || !strings.Contains(verdict, denyACNP) {
			t.Errorf("verdict %q: want the drop and rule %s of %s", verdict, denyRule, denyACNP)
		}
		if len(dropBoxes) != 1 {
			t.Errorf("%d drop boxes in the graph, want 1", len(dropBoxes))
		}
		shot(t, "traceflow")
		noErrors(t, "traceflow")
	})

	t.Run("Policies: the ACNP in its Tier with its rule, Pods, realization, and hit counts rising after traffic", func(t *testing.T) {
		np := cl.computedACNP(t)
		agent := cl.agentClient(t)
		reportRealized(t, cl.ctx, agent, np, "node-1")
		run(t, "policies", chromedp.Navigate(base+"/#/policies"),
			chromedp.WaitVisible(chromedp.CSS(`[data-tier="securityops"] [data-policy="`+denyACNP+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-policy="`+denyACNP+`"] [data-node="node-1"][data-state="realized"]`)))
		text := value(t, "policy", chromedp.Text(chromedp.CSS(`[data-policy="`+denyACNP+`"]`)))
		if !strings.Contains(text, denyRule) || !strings.Contains(text, "Drop") || !strings.Contains(text, "Applies to 1 member: demo/web") {
			t.Errorf("policy block %q: want rule %s, Drop, applied to demo/web", text, denyRule)
		}
		cell := `[data-policy="` + denyACNP + `"] tr[data-rule="` + denyRule + `"] td.packets`
		packets := func() int {
			t.Helper()
			s := value(t, "packets", chromedp.Text(chromedp.CSS(cell)))
			n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
			if err != nil {
				return -1 // "–": no count yet
			}
			return n
		}
		before := packets()
		// The agent of node-1 reports 1,500 dropped packets; the page
		// (which refreshes every 10 s; reloaded here, not to wait) shows
		// the count rise by as much.
		reportDrops(t, cl.ctx, agent, np, "node-1", 1500)
		want := max(before, 0) + 1500
		run(t, "the count rises", chromedp.Reload(), chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, cell,
			strconv.FormatInt(int64(want)/1000, 10)+","+fmt.Sprintf("%03d", want%1000)), chromedp.WithPollingTimeout(15*time.Second)))
		if after := packets(); after != want {
			t.Errorf("rule %s packets %d → %d after 1500 dropped packets, want %d", denyRule, before, after, want)
		}
		shot(t, "policies")
		noErrors(t, "policies")
	})

	t.Run("Pipeline: the diagram of a Node", func(t *testing.T) {
		run(t, "pipeline", chromedp.Navigate(base+"/#/pipeline"), chromedp.WaitVisible(chromedp.CSS(`.diagram svg`)),
			chromedp.SetValue(chromedp.ID("#pl-node"), "node-2"))
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("pl-node").dispatchEvent(new Event("change"))`)); err != nil {
			t.Fatal(err)
		}
		run(t, "node-2", chromedp.WaitVisible(chromedp.CSS(`.diagram[aria-label="OVS pipeline of node-2"] svg`)))
		if title := value(t, "title", chromedp.TextContent(chromedp.CSS(`.diagram svg text`))); !strings.Contains(title, "node-2") {
			t.Errorf("pipeline title %q, want node-2's", title)
		}
		shot(t, "pipeline")
		noErrors(t, "pipeline")
	})

	t.Run("Flows: the service map, the denied connection in red", func(t *testing.T) {
		run(t, "flows", chromedp.Navigate(base+"/#/flows"),
			chromedp.WaitVisible(chromedp.CSS(`[data-page="flows"] svg g.edge.denied[data-from="demo/web"][data-to="demo/db"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-page="flows"] svg g.edge.allowed[data-from="demo/client"][data-to="demo/web"]`)))
		stroke := value(t, "stroke", chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector('[data-page="flows"] g.edge.denied polyline')).stroke`))
		if stroke != "rgb(179, 38, 30)" {
			t.Errorf("the denied edge is drawn in %s, want red (#b3261e)", stroke)
		}
		row := value(t, "row", chromedp.Text(chromedp.CSS(`tr.drop[data-from="demo/web"]`)))
		if !strings.Contains(row, "denied") || !strings.Contains(row, denyRule) {
			t.Errorf("the denied pair's row %q: want it marked denied, naming rule %s", row, denyRule)
		}
		shot(t, "flows")
		noErrors(t, "flows")
	})

	t.Run("Password: the form renders", func(t *testing.T) {
		run(t, "password", chromedp.Navigate(base+"/#/password"), chromedp.WaitVisible(chromedp.ID(`#pw-new`)))
		noErrors(t, "password")
	})

	t.Logf("figures: first load of the login page (cold browser) %v; login to Summary shown %v; Summary reload (warm) %v; antrea-ui RSS %d KiB",
		cold.Round(time.Millisecond), login.Round(time.Millisecond), warm.Round(time.Millisecond), rssKiB(pid))
	for _, f := range []string{"main.js", "style.css", "index.html"} {
		if a := served[f]; a != nil {
			t.Logf("figures: bundle %s %d bytes", f, len(a.body))
		}
	}
}
