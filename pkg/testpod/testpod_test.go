package testpod

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// freePort returns a loopback port that was free a moment ago for the protocol.
func freePort(t *testing.T, protocol string) int {
	t.Helper()
	switch protocol {
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	default:
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
}

// startServer serves name on one TCP and one UDP loopback port until the test ends.
func startServer(t *testing.T, name string) (tcpPort, udpPort int) {
	t.Helper()
	tcpPort, udpPort = freePort(t, "tcp"), freePort(t, "udp")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{Name: name, Host: "127.0.0.1", TCPPorts: []int{tcpPort}, UDPPorts: []int{udpPort}, Ready: ready})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve ended before it was ready: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve was not ready within 5s")
	}
	return tcpPort, udpPort
}

func TestConnectReportsWhoAnsweredOrWhyNot(t *testing.T) {
	tcpPort, udpPort := startServer(t, "pod-a")
	closedTCP := freePort(t, "tcp")
	closedUDP := freePort(t, "udp")

	// A bound UDP socket that never answers: the probe hears nothing back.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentPort := silent.LocalAddr().(*net.UDPAddr).Port

	tests := []struct {
		name     string
		protocol string
		port     int
		want     Verdict
		wantName string
	}{
		{"a TCP probe to a serving port is connected and names the server", "tcp", tcpPort, Connected, "pod-a"},
		{"a UDP probe to a serving port is connected and names the server", "udp", udpPort, Connected, "pod-a"},
		{"a TCP probe to a closed port is refused", "tcp", closedTCP, Refused, ""},
		{"a UDP probe to a closed port is refused by ICMP port unreachable", "udp", closedUDP, Refused, ""},
		{"a UDP probe to a port that never answers times out", "udp", silentPort, Timeout, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Connect(context.Background(), ConnectConfig{
				Protocol: tt.protocol, To: net.JoinHostPort("127.0.0.1", strconv.Itoa(tt.port)), Timeout: 500 * time.Millisecond,
			})
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			if res.Verdict != tt.want || res.Name != tt.wantName {
				t.Fatalf("got %q (err %v), want verdict %q name %q", res.String(), res.Err, tt.want, tt.wantName)
			}
		})
	}
}

func TestConnectRejectsProbesItCannotRun(t *testing.T) {
	tests := []struct {
		name string
		cfg  ConnectConfig
	}{
		{"an unknown protocol is an error", ConnectConfig{Protocol: "icmp", To: "127.0.0.1:80", Timeout: time.Second}},
		{"an address without a port is an error", ConnectConfig{Protocol: "tcp", To: "127.0.0.1", Timeout: time.Second}},
		{"a zero timeout is an error", ConnectConfig{Protocol: "tcp", To: "127.0.0.1:80"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Connect(context.Background(), tt.cfg); err == nil {
				t.Fatal("Connect succeeded, want an error")
			}
		})
	}
}

func TestMainPrintsTheVerdictAndExitsWithItsCode(t *testing.T) {
	tcpPort, udpPort := startServer(t, "pod-b")
	closedTCP := freePort(t, "tcp")
	tests := []struct {
		name       string
		args       []string
		wantExit   int
		wantStdout string
	}{
		{"connect over TCP prints connected and the name, exit 0",
			[]string{"connect", "--to", fmt.Sprintf("127.0.0.1:%d", tcpPort), "--timeout", "1s"}, 0, "connected pod-b\n"},
		{"connect over UDP prints connected and the name, exit 0",
			[]string{"connect", "--protocol", "udp", "--to", fmt.Sprintf("127.0.0.1:%d", udpPort), "--timeout", "1s"}, 0, "connected pod-b\n"},
		{"connect to a closed port prints refused, exit 1",
			[]string{"connect", "--to", fmt.Sprintf("127.0.0.1:%d", closedTCP), "--timeout", "1s"}, 1, "refused\n"},
		{"connect without --to is a usage error, exit 3",
			[]string{"connect"}, ExitCodeError, ""},
		{"--version prints the binary's version",
			[]string{"--version"}, 0, "antrea-testpod v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantExit {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tt.wantExit, stdout.String(), stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) {
				t.Fatalf("stdout %q, want prefix %q", stdout.String(), tt.wantStdout)
			}
		})
	}
}

// TestTCPProbeIntoSilenceTimesOut sends a SYN into a veth pair inside a
// netns this test creates: nothing ever answers, so the verdict is timeout.
func TestTCPProbeIntoSilenceTimesOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	name := fmt.Sprintf("nodesim-testpod-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", "silence", "type", "veth", "peer", "name", "void"},
		{"addr", "add", "192.0.2.1/24", "dev", "silence"},
		{"link", "set", "silence", "up"},
		{"link", "set", "void", "up"},
		// A static neighbour: the SYN leaves at once, and the peer, which has
		// no address, drops it.
		{"neigh", "add", "192.0.2.2", "lladdr", "02:00:00:00:00:02", "dev", "silence"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	var res Result
	err := ns.WithNetNSPath("/var/run/netns/"+name, func(ns.NetNS) error {
		// The socket belongs to the netns of the thread that creates it, which
		// WithNetNSPath keeps locked.
		var err error
		res, err = Connect(context.Background(), ConnectConfig{Protocol: "tcp", To: "192.0.2.2:80", Timeout: 300 * time.Millisecond})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Timeout {
		t.Fatalf("got %q (err %v), want timeout", res.String(), res.Err)
	}
}

func TestConnectLoopCountsEveryVerdictAndTheLongestGap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	cfg := LoopConfig{ConnectConfig: ConnectConfig{Protocol: "tcp", To: addr, Timeout: 200 * time.Millisecond},
		Every: 10 * time.Millisecond, For: 300 * time.Millisecond}
	up, err := ConnectLoop(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if up.Attempts < 2 || up.Connected != up.Attempts || up.LongestGap != 0 {
		t.Errorf("a listening port: want every probe connected and no gap, got %s", up)
	}
	ln.Close()
	down, err := ConnectLoop(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if down.Attempts < 2 || down.Refused != down.Attempts || down.Connected != 0 {
		t.Errorf("a closed port: want every probe refused, got %s", down)
	}
	if down.LongestGap < cfg.For {
		t.Errorf("a closed port: the gap should span the whole loop (%v), got %v", cfg.For, down.LongestGap)
	}
	if _, err := ConnectLoop(ctx, LoopConfig{ConnectConfig: cfg.ConnectConfig}); err == nil {
		t.Error("a loop without --every and --for should be refused")
	}
}

// TestHTTPReportsTheClientAddressTheServerSees dials from a chosen local
// address so that the answer is known independently of the server.
func TestHTTPReportsTheClientAddressTheServerSees(t *testing.T) {
	port := freePort(t, "tcp")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{Name: "outside", Host: "127.0.0.1", HTTPPorts: []int{port}, Ready: ready})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	<-ready
	// 127.0.0.2 is a loopback address other than the server's own.
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: local}).DialContext, DisableKeepAlives: true}}
	get := func(path string) string {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %q %v", path, resp.StatusCode, b, err)
		}
		return string(b)
	}
	host, _, err := net.SplitHostPort(get("/clientip"))
	if err != nil || host != "127.0.0.2" {
		t.Errorf("/clientip answered host %q (%v), want 127.0.0.2", host, err)
	}
	if got := get("/hostname"); got != "outside" {
		t.Errorf("/hostname = %q, want outside", got)
	}
}

// hold opens N connections to a holding server and keeps them until its
// context ends; the server keeps every one open.
func TestHoldKeepsTheConnectionsOpen(t *testing.T) {
	port := freePort(t, "tcp")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srvDone := make(chan error, 1)
	go func() { srvDone <- Hold(ctx, HoldConfig{Listen: addr}) }()
	time.Sleep(100 * time.Millisecond)
	opened := make(chan int, 1)
	cliDone := make(chan error, 1)
	go func() {
		cliDone <- Hold(ctx, HoldConfig{To: addr, Count: 50, Rate: 1000, Opened: func(n int) { opened <- n }})
	}()
	select {
	case n := <-opened:
		if n != 50 {
			t.Fatalf("opened %d, want 50", n)
		}
	case err := <-cliDone:
		t.Fatalf("the client ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not open its connections")
	}
	cancel()
	if err := <-cliDone; err != nil {
		t.Error(err)
	}
	if err := <-srvDone; err != nil {
		t.Error(err)
	}
}

func TestFloodAttemptsAtTheRate(t *testing.T) {
	port := freePort(t, "tcp")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Hold(ctx, HoldConfig{Listen: addr}) }()
	time.Sleep(100 * time.Millisecond)
	res, err := Flood(ctx, FloodConfig{To: addr, Rate: 200, For: 500 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts < 50 || res.Attempts > 110 || res.Connected != res.Attempts {
		t.Errorf("%+v, want about 100 attempts, all connected", res)
	}
}
