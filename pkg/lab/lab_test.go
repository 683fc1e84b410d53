package lab

import (
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAPIServerCertificateIsValidForEveryNameClientsUse(t *testing.T) {
	p, err := newPKI(net.ParseIP("172.30.0.2"), net.ParseIP("fd00:172:30::2"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.CA.cert)
	for _, name := range []string{"127.0.0.1", "172.30.0.2", "10.96.0.1", "localhost", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"} {
		t.Run(name, func(t *testing.T) {
			if _, err := p.APIServer.cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Fatalf("serving certificate should verify for %s: %v", name, err)
			}
		})
	}
	if _, err := p.APIServer.cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Fatal("serving certificate should not verify for a name it was not issued for")
	}
}

func TestClientCertificatesCarryUserAndGroupsAndChainToTheirCA(t *testing.T) {
	p, err := newPKI(net.ParseIP("172.30.0.2"), net.ParseIP("fd00:172:30::2"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		ca     *keyPair
		user   string
		groups []string
	}{
		{"a node is system:node:NAME in system:nodes", p.CA, "system:node:node-1", []string{"system:nodes"}},
		{"the admin is in system:masters", p.CA, "kubernetes-admin", []string{"system:masters"}},
		{"the front-proxy client chains to the front-proxy CA", p.FrontProxy, "front-proxy-client", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := tt.ca.clientCert(tt.user, tt.groups...)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(tt.ca.cert)
			if _, err := kp.cert.Verify(x509.VerifyOptions{Roots: roots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatalf("client certificate should chain to its CA: %v", err)
			}
			if kp.cert.Subject.CommonName != tt.user || len(kp.cert.Subject.Organization) != len(tt.groups) {
				t.Fatalf("subject %v, want CN %s O %v", kp.cert.Subject, tt.user, tt.groups)
			}
		})
	}
}

func TestUnderlayAddressesAndNamesOfNodes(t *testing.T) {
	tests := []struct {
		node         int
		ip, name, ns string
	}{
		{1, "172.30.0.11", "node-1", "antrea-lab-node-1"},
		{2, "172.30.0.12", "node-2", "antrea-lab-node-2"},
		{10, "172.30.0.20", "node-10", "antrea-lab-node-10"},
	}
	if got := controlPlaneIP().String(); got != "172.30.0.2" {
		t.Errorf("control plane IP %s, want 172.30.0.2", got)
	}
	for _, tt := range tests {
		if got := nodeIP(tt.node).String(); got != tt.ip {
			t.Errorf("node %d IP %s, want %s", tt.node, got, tt.ip)
		}
		if NodeName(tt.node) != tt.name || nodeNetNS(tt.node) != tt.ns {
			t.Errorf("node %d named %s in %s, want %s in %s", tt.node, NodeName(tt.node), nodeNetNS(tt.node), tt.name, tt.ns)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr bool
	}{
		{"defaults are valid", func(*Options) {}, false},
		{"zero nodes are refused", func(o *Options) { o.Nodes = 0 }, true},
		{"vxlan is a valid encap", func(o *Options) { o.Encap = "vxlan" }, false},
		{"gre is an encap the lab offers", func(o *Options) { o.Encap = "gre" }, false},
		{"stt is not an encap the lab offers", func(o *Options) { o.Encap = "stt" }, true},
		{"the antrea runtime is accepted", func(o *Options) { o.Runtime = RuntimeAntrea }, false},
		{"an unknown runtime is refused", func(o *Options) { o.Runtime = "kubenet" }, true},
		{"5,000 simulated nodes are accepted", func(o *Options) { o.SimNodes = 5000 }, false},
		{"a negative number of simulated nodes is refused", func(o *Options) { o.SimNodes = -1 }, true},
		{"more simulated nodes than the bound are refused", func(o *Options) { o.SimNodes = MaxSimNodes + 1 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			if err := o.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestStateSurvivesARoundTripThroughItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := &stateStore{path: path, st: State{Phase: PhaseStarting, StartedAt: time.Now()}}
	if err := s.update(func(st *State) {
		st.NetNS = append(st.NetNS, UnderlayNetNS)
		st.Processes = append(st.Processes, Process{Component: "etcd", PID: 42, StartTime: 7})
	}); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != PhaseStarting || len(got.NetNS) != 1 || got.Processes[0].PID != 42 {
		t.Fatalf("state read back differs: %+v", got)
	}
	if none, err := LoadState(filepath.Join(t.TempDir(), "missing.json")); none != nil || err != nil {
		t.Fatalf("a missing state file means no lab, got %v, %v", none, err)
	}
}

func TestAliveTellsRunningFromExitedZombieAndReusedProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := Process{PID: cmd.Process.Pid, StartTime: processStartTime(cmd.Process.Pid)}
	if !p.Alive() {
		t.Fatal("a running process should be alive")
	}
	if reused := (Process{PID: p.PID, StartTime: p.StartTime + 1}); reused.Alive() {
		t.Fatal("a PID with another start time is another process: not ours, not alive")
	}
	if self := (Process{PID: os.Getpid()}); !self.Alive() || self.RSSBytes() == 0 {
		t.Fatal("this test process should be alive with some RSS")
	}
	_ = cmd.Process.Kill()
	// Not waited for yet: the child is a zombie, which must count as dead.
	deadline := time.Now().Add(5 * time.Second)
	for p.Alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p.Alive() {
		t.Fatal("a killed (zombie) process should not be alive")
	}
}

func TestLogsFindsAComponentsLogByNodeNameOrNumber(t *testing.T) {
	o := DefaultOptions()
	o.Dir = t.TempDir()
	if err := os.MkdirAll(o.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.LogPath("nodesim", "node-1"), []byte("hello from node-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, component, node string
		want                  string
		wantErr               bool
	}{
		{"a node given by name", "nodesim", "node-1", "hello from node-1\n", false},
		{"a node given by number", "nodesim", "1", "hello from node-1\n", false},
		{"a component without a log names the logs there are", "etcd", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := Logs(o, tt.component, tt.node, &out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Logs() = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "nodesim-node-1") {
				t.Fatalf("the error should list the available logs: %v", err)
			}
			if out.String() != tt.want {
				t.Fatalf("Logs() printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}
