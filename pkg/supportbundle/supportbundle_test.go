package supportbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// Secrets as they appear in what a bundle collects: a kubeconfig with a
// client key and a token, a ServiceAccount token (a JWT) in a log line, a
// bearer header, a PEM private key, a password in a conf file and in a URL.
const (
	jwtToken      = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0.c2lnbmF0dXJlc2lnbmF0dXJl"
	staticToken   = "s3cr3t-static-token-0123456789"
	clientKeyData = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUtleQ=="
	pemKeyBody    = "MHcCAQEEIKeyMaterialThatMustNotLeakAAAAAAAAAAAAAAAAAAAAAAoAoGCCqGSM49"
	password      = "hunter2-passw0rd"
)

var kubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: Q0EgY2VydA==
    server: https://172.30.0.2:6443
  name: lab
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: ` + clientKeyData + `
    token: ` + staticToken + `
`

var secrets = []string{jwtToken, staticToken, clientKeyData, pemKeyBody, password}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, keep string }{
		{kubeconfig, "server: https://172.30.0.2:6443"},
		{"I1202 request GET /api with Authorization: Bearer " + jwtToken + " took 3ms", "took 3ms"},
		{`{"token":"` + staticToken + `","user":"admin"}`, `"user":"admin"`},
		{"-----BEGIN EC PRIVATE KEY-----\n" + pemKeyBody + "\n-----END EC PRIVATE KEY-----\n", "PRIVATE KEY-----"},
		{"ovsdbPassword = " + password + "\nenableTokenReview: true\n", "enableTokenReview: true"},
		{"proxy https://admin:" + password + "@proxy.example:3128 up", "@proxy.example:3128 up"},
		{"--token=" + staticToken + " --v=2", "--v=2"},
		{"tokenExpirationSeconds: 3600\nsecretName: antrea-ca\n", ""},
	} {
		out, n := Redact([]byte(tc.in))
		for _, s := range append(secrets, "antrea-ca", "3600") {
			if strings.Contains(tc.in, s) && bytes.Contains(out, []byte(s)) {
				t.Errorf("Redact(%q) kept %q: %s", tc.in, s, out)
			}
		}
		if !bytes.Contains(out, []byte(tc.keep)) {
			t.Errorf("Redact(%q) lost %q: %s", tc.in, tc.keep, out)
		}
		if n == 0 {
			t.Errorf("Redact(%q) counted nothing", tc.in)
		}
	}
}

// A bundle of a node made of files holding secrets: none of them is in the
// tarball; the entries, the tails of big logs and the failed commands are
// in the summary.
func TestCollectKeepsNoSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	conf := write("conf/antrea-agent.conf", "ovsBridge: br-int\nclientConnection:\n  kubeconfig: "+filepath.Join(dir, "conf/kubeconfig")+"\nantreaProxy:\n  enable: true\n")
	kc := write("conf/kubeconfig", kubeconfig)
	write("log/antrea-agent.log", "I1202 started\nI1202 token="+staticToken+"\n")
	big := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", 4096) + "last line\n"
	write("log/openvswitch/ovs-vswitchd.log", big)
	write("log/networkpolicy/np.log", "2026/12/02 AntreaPolicyIngressRule Allow\n")
	write("key.pem", "-----BEGIN PRIVATE KEY-----\n"+pemKeyBody+"\n-----END PRIVATE KEY-----\n")
	c := &Collector{Component: "antrea-agent", Node: "node-1", Version: "v0.1.0",
		ConfigFiles: []string{conf, kc, filepath.Join(dir, "key.pem"), filepath.Join(dir, "missing.conf")},
		LogGlobs:    []string{filepath.Join(dir, "log", "*.log"), filepath.Join(dir, "log", "*", "*.log")},
		TailBytes:   64 << 10,
		Commands: []Command{
			{Name: "network/ip-addr.txt", Argv: []string{"ip", "addr"}},
			{Name: "firewall/nft-ruleset.txt", Argv: []string{"nft", "list", "ruleset"}},
		},
		Funcs: []Func{{Name: "env.txt", Write: func(_ context.Context, w io.Writer) error {
			_, err := fmt.Fprintf(w, "KUBE_TOKEN=%s\nPASSWORD=%s\n", jwtToken, password)
			return err
		}}},
		Run: func(_ context.Context, _ []string, argv ...string) ([]byte, error) {
			if argv[0] == "nft" {
				return []byte("partial"), errors.New("nft: command not found")
			}
			return []byte("1: lo: <LOOPBACK,UP>\n"), nil
		},
	}
	var buf bytes.Buffer
	s, err := c.Collect(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range secrets {
		if bytes.Contains(buf.Bytes(), []byte(sec)) {
			t.Errorf("the compressed bundle holds %q", sec)
		}
	}
	entries, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range entries {
		for _, sec := range secrets {
			if bytes.Contains(data, []byte(sec)) {
				t.Errorf("entry %s holds secret %q", name, sec)
			}
		}
	}
	for _, name := range []string{"version.txt", "config/antrea-agent.conf", "config/kubeconfig", "config/key.pem",
		"logs/antrea-agent.log", "logs/openvswitch/ovs-vswitchd.log", "logs/networkpolicy/np.log",
		"network/ip-addr.txt", "env.txt", SummaryName} {
		if _, ok := entries[name]; !ok {
			t.Errorf("no entry %s; entries: %v", name, keys(entries))
		}
	}
	if !bytes.Contains(entries["config/kubeconfig"], []byte("server: https://172.30.0.2:6443")) {
		t.Errorf("the kubeconfig lost its server:\n%s", entries["config/kubeconfig"])
	}
	ovs := entries["logs/openvswitch/ovs-vswitchd.log"]
	if len(ovs) > 64<<10 || !bytes.HasSuffix(ovs, []byte("last line\n")) || !bytes.HasPrefix(ovs, []byte("0123")) {
		t.Errorf("the big log is not its tail from a line start (%d bytes)", len(ovs))
	}
	var got Summary
	if err := json.Unmarshal(entries[SummaryName], &got); err != nil {
		t.Fatal(err)
	}
	byName := map[string]Item{}
	for _, it := range got.Items {
		byName[it.Name] = it
	}
	if !byName["logs/openvswitch/ovs-vswitchd.log"].Truncated || byName["logs/antrea-agent.log"].Truncated {
		t.Errorf("truncation recorded wrongly: %+v", got.Items)
	}
	if e := byName["firewall/nft-ruleset.txt"].Error; !strings.Contains(e, "nft: command not found") {
		t.Errorf("the failed command is not recorded: %q", e)
	}
	if e := byName["config/missing.conf"].Error; e == "" {
		t.Errorf("the missing file is not recorded")
	}
	if byName["config/kubeconfig"].Redacted < 2 || byName["env.txt"].Redacted < 2 {
		t.Errorf("redaction counts: %+v", got.Items)
	}
	if len(s.Failed()) != 2 {
		t.Errorf("failed items %+v, want the nft command and the missing file", s.Failed())
	}

	// Extend adds entries (redacted) and keeps the rest.
	var ext bytes.Buffer
	s2, err := Extend(bytes.NewReader(buf.Bytes()), &ext, func(b *Bundle) error {
		return b.Add("pod-logs/antrea-agent.log", []byte("Bearer "+jwtToken+"\n"), false)
	}, func() time.Time { return time.Unix(0, 0) })
	if err != nil {
		t.Fatal(err)
	}
	e2, err := Read(&ext)
	if err != nil {
		t.Fatal(err)
	}
	if len(e2) != len(entries)+1 || bytes.Contains(e2["pod-logs/antrea-agent.log"], []byte(jwtToken)) || len(s2.Items) != len(got.Items)+1 {
		t.Errorf("Extend: %d entries (had %d), summary %d items (had %d)", len(e2), len(entries), len(s2.Items), len(got.Items))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// On a real OVS: the flows and groups entries hold what ovs-ofctl dumps.
func TestAgentCollectorDumpsTheBridge(t *testing.T) {
	br := bridgetest.New(t)
	br.Ofctl("add-flow", "br-int", "table=3,priority=100,ip,nw_dst=10.10.0.2,actions=goto_table:4")
	br.Ofctl("add-group", "br-int", "group_id=7,type=select,bucket=output:1")
	conf := agentconfig.Defaults()
	conf.OVSRunDir = br.Dir()
	c := AgentCollector(AgentOptions{Node: "node-1", Conf: conf, LogDir: t.TempDir(), InProcess: true})
	var buf bytes.Buffer
	if _, err := c.Collect(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	entries, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(entries["ovs/flows.txt"]), "table=3, n_packets=0, n_bytes=0, duration=") ||
		!strings.Contains(string(entries["ovs/flows.txt"]), "nw_dst=10.10.0.2") {
		t.Errorf("flows.txt:\n%s", entries["ovs/flows.txt"])
	}
	if !strings.Contains(string(entries["ovs/groups.txt"]), "group_id=7,type=select") {
		t.Errorf("groups.txt:\n%s", entries["ovs/groups.txt"])
	}
	// ovs-appctl dpctl/ct-stats-show on the bridge's own ovs-vswitchd.
	if !strings.Contains(string(entries["conntrack/ovs-ct-stats.txt"]), "Connections") {
		t.Errorf("ovs-ct-stats.txt: %q; summary %s", entries["conntrack/ovs-ct-stats.txt"], entries[SummaryName])
	}
	if !strings.Contains(string(entries["profiles/goroutine.txt"]), "goroutine ") || len(entries["profiles/heap.pb.gz"]) == 0 {
		t.Errorf("no profiles")
	}
}

// The agent API's /supportbundle streams the collector's tarball and takes
// tailBytes from the query.
func TestHandler(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.log"), []byte(strings.Repeat("line of a log\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	var gotTail int64
	h := Handler(func(tail int64) *Collector {
		gotTail = tail
		return &Collector{Component: "antrea-agent", LogGlobs: []string{filepath.Join(dir, "*.log")}, TailBytes: tail}
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "?tailBytes=140")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	entries, err := Read(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if gotTail != 140 || resp.Header.Get("Content-Type") != "application/gzip" || len(entries["logs/a.log"]) > 140 || len(entries["logs/a.log"]) == 0 {
		t.Errorf("tail %d, type %q, log %q", gotTail, resp.Header.Get("Content-Type"), entries["logs/a.log"])
	}
	bad, err := http.Get(srv.URL + "?tailBytes=-1")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Errorf("tailBytes=-1: %s", bad.Status)
	}
}

// ?since=D leaves out the log files not written for D (upstream antctl's
// --since); a file written since is kept.
func TestHandlerSinceLeavesOutOldLogFiles(t *testing.T) {
	dir := t.TempDir()
	for name, age := range map[string]time.Duration{"old.log": 3 * time.Hour, "new.log": time.Minute} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("a line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Handler(func(tail int64) *Collector {
		return &Collector{Component: "antrea-agent", LogGlobs: []string{filepath.Join(dir, "*.log")}, TailBytes: tail}
	}))
	defer srv.Close()
	for query, want := range map[string][]string{"?since=1h": {"logs/new.log"}, "": {"logs/new.log", "logs/old.log"}} {
		resp, err := http.Get(srv.URL + query)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := Read(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var logs []string
		for name := range entries {
			if strings.HasPrefix(name, "logs/") {
				logs = append(logs, name)
			}
		}
		sort.Strings(logs)
		if strings.Join(logs, " ") != strings.Join(want, " ") {
			t.Errorf("%q: logs %v, want %v", query, logs, want)
		}
	}
	bad, err := http.Get(srv.URL + "?since=yesterday")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Errorf("since=yesterday: %s", bad.Status)
	}
}
