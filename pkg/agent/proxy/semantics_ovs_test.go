package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// conntrack returns the switch's conntrack entries mentioning every part.
func (n *ovsNode) conntrack(t *testing.T, parts ...string) []string {
	t.Helper()
	out, err := n.Appctl("dpctl/dump-conntrack")
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	for _, line := range strings.Split(out, "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			hits = append(hits, line)
		}
	}
	return hits
}

// askOn sends a datagram on a connected UDP socket and returns who answered.
func askOn(t *testing.T, c net.Conn) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte("who?")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 256)
	k, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	who, _ := bridgetest.Answerer(strings.TrimSpace(string(buf[:k])))
	return who, nil
}

// TestStaleUDPConntrackOnRealOVS: a client that keeps its UDP socket (a DNS
// client) talks to a Service; its endpoint leaves the Service (the pod is
// still up, answering: only the flush can move the client). Kubernetes'
// semantics, as kube-proxy realizes them: the entry DNATing the client to
// the removed endpoint is flushed, and the next datagram on the same
// socket reaches a live endpoint. When the Service goes, its entries go.
func TestStaleUDPConntrackOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("dns", corev1.ProtocolUDP, 5353))
	n := newOVSNode(t, Config{},
		service("dns", "10.96.0.53", svcPort("dns", corev1.ProtocolUDP, 53, 5353)),
		slice("dns-1", "dns", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.1.4", node: "node-1"}),
	)
	cli, e1, e2 := n.clientAndTwoEndpoints(t)
	for _, p := range []*bridgetest.Pod{cli, e1, e2} {
		p.ServeWho(t, 5353)
	}
	// A UDP port has two groups: its own and its fragments'.
	n.waitGroups(t, "dns should have both endpoints", func(g []string) bool { return len(g) == 2 && bucketsOf(g) == 4 })

	c, err := cli.Dial(t, "udp4", "10.96.0.53:53", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var first string
	for i := 0; i < 5 && first == ""; i++ { // the first datagrams may go while ARP resolves
		first, _ = askOn(t, c)
	}
	if first == "" {
		t.Fatal("the Service did not answer")
	}
	gone, kept := e1, e2
	if first == "e2" {
		gone, kept = e2, e1
	}
	src := "src=10.10.1.2,dst=10.96.0.53"
	hits := n.conntrack(t, src, "src="+gone.IP.String()+",dst=10.10.1.2", "zone=65520")
	if len(hits) != 1 {
		t.Fatalf("the client's datagrams should have one entry DNATed to %s in zone 65520, got %v", gone.Name, hits)
	}
	t.Logf("before: %s", hits[0])
	for i := 0; i < 3; i++ {
		if who, err := askOn(t, c); err != nil || who != gone.Name {
			t.Fatalf("the same socket should stay with %s, got %q (%v)", gone.Name, who, err)
		}
	}

	// The endpoint leaves the Service; its pod keeps answering.
	updateSlice(t, n.client, "dns-1", func(s *discoveryv1.EndpointSlice) {
		var keep []discoveryv1.Endpoint
		for _, e := range s.Endpoints {
			if e.Addresses[0] != gone.IP.String() {
				keep = append(keep, e)
			}
		}
		s.Endpoints = keep
	})
	n.waitGroups(t, "dns should have one endpoint", func(g []string) bool { return bucketsOf(g) == 2 && hasAll(g, reg3(kept)) })
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(n.conntrack(t, src, "src="+gone.IP.String())) == 0, nil
	}); err != nil {
		t.Fatalf("the entry DNATed to the removed %s should be flushed:\n%s", gone.Name, strings.Join(n.conntrack(t, "zone=65520"), "\n"))
	}
	if who, err := askOn(t, c); err != nil || who != kept.Name {
		t.Fatalf("the next datagram on the same socket should reach the live %s, got %q (%v)", kept.Name, who, err)
	}
	t.Logf("after the flush: %s", strings.Join(n.conntrack(t, src), "\n"))

	// The Service goes: nothing of its entries is left.
	if err := n.client.CoreV1().Services("default").Delete(context.Background(), "dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitGroups(t, "no group should remain", func(g []string) bool { return len(g) == 0 })
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(n.conntrack(t, src)) == 0, nil
	}); err != nil {
		t.Fatalf("the entries of the deleted Service should be flushed:\n%s", strings.Join(n.conntrack(t, src), "\n"))
	}
}

// TestSCTPPortGetsAnEventOnRealOVS: a Service with a TCP and an SCTP port
// on the userspace datapath: the SCTP port gets a Warning Event naming why,
// the TCP port of the same Service is installed and answers.
func TestSCTPPortGetsAnEventOnRealOVS(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	n := newOVSNode(t, Config{Recorder: rec, DatapathType: "netdev"},
		service("sig", "10.96.0.60", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("diameter", corev1.ProtocolSCTP, 3868, 3868)),
		slice("sig-1", "sig", slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("diameter", corev1.ProtocolSCTP, 3868)),
			ep{ip: "10.10.1.3", node: "node-1"}),
	)
	cli := n.addPod(t, "c1", "10.10.1.2/24")
	e1 := n.addPod(t, "e1", "10.10.1.3/24")
	e1.ServeWho(t, 8080)
	n.waitGroups(t, "sig should have one group, its TCP port's", func(g []string) bool { return len(g) == 1 && bucketsOf(g) == 1 })
	if who, _ := bridgetest.Answerer(cli.AskWhoEventually(t, "tcp4", "10.96.0.60:80")); who != "e1" {
		t.Fatalf("the TCP port should reach e1, answered %q", who)
	}
	if lb := n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.ServiceLBTable).ID)); strings.Contains(strings.Join(lb, "\n"), "sctp") {
		t.Fatalf("no flow should match the SCTP port:\n%s", strings.Join(lb, "\n"))
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning SCTPNotSupported SCTP port(s) diameter (3868/SCTP) not realized: the OVS userspace datapath's conntrack keeps no SCTP ports") {
			t.Fatalf("unexpected event %q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Warning Event for the SCTP port")
	}
	select {
	case e := <-rec.Events:
		t.Fatalf("one event only, got also %q", e)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestUDPAndTCPConnectionsSpreadOverEveryEndpointOnRealOVS: each new
// connection from one client to a Service port (a fresh socket, so a fresh
// source port) may go to any endpoint, over UDP as over TCP. With the
// switch's default selection method the userspace datapath hashed UDP
// without its ports, so one client's UDP datagrams all went to one endpoint
// (issue 34). 24 connections all to one of two endpoints would happen by
// chance once in 2^23.
func TestUDPAndTCPConnectionsSpreadOverEveryEndpointOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("udp", corev1.ProtocolUDP, 8081), epPort("tcp", corev1.ProtocolTCP, 8081))
	n := newOVSNode(t, Config{},
		service("echo", "10.96.0.90", svcPort("udp", corev1.ProtocolUDP, 90, 8081), svcPort("tcp", corev1.ProtocolTCP, 90, 8081)),
		slice("echo-1", "echo", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.1.4", node: "node-1"}),
	)
	cli, e1, e2 := n.clientAndTwoEndpoints(t)
	for _, p := range []*bridgetest.Pod{cli, e1, e2} {
		p.ServeWho(t, 8081)
	}
	// Three groups: TCP's, UDP's and the group of UDP's fragments.
	n.waitGroups(t, "both ports should have both endpoints", func(g []string) bool { return len(g) == 3 && bucketsOf(g) == 6 })
	for _, network := range []string{"udp4", "tcp4"} {
		seen := answerers(t, cli, network, "10.96.0.90:90", 24)
		if seen["e1"] == 0 || seen["e2"] == 0 || seen["e1"]+seen["e2"] != 24 {
			t.Errorf("%s: 24 connections from one client should reach both endpoints, answered %v", network, seen)
		}
		t.Logf("%s: %v", network, seen)
	}
}

// TestUDPFromAFixedPortReachesAnEndpointThatBecameReadyOnRealOVS follows
// upstream's e2e "Conntrack should be able to preserve UDP traffic when
// initial unready endpoints get ready": a client sends from one source port
// (a new socket each time, as `nc -u -p PORT` does) to a Service whose only
// endpoint is not ready, so it is refused; once the endpoint is ready the
// client's next datagram from that same port must reach it, whatever
// conntrack kept of the refused ones.
func TestUDPFromAFixedPortReachesAnEndpointThatBecameReadyOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("udp", corev1.ProtocolUDP, 8081))
	n := newOVSNode(t, Config{},
		service("late", "10.96.0.91", svcPort("udp", corev1.ProtocolUDP, 80, 8081)),
		slice("late-1", "late", ports, ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false)}),
	)
	cli := n.addPod(t, "c1", "10.10.1.2/24")
	e1 := n.addPod(t, "e1", "10.10.1.3/24")
	e1.ServeWho(t, 8081)
	n.waitGroups(t, "late should reject (one bucket, no endpoint, and its fragment group)", func(g []string) bool { return len(g) == 2 && !hasAll(g, reg3(e1)) })
	// ask sends one datagram from source port 40404 on a new socket and
	// returns the answer, or the error the socket saw (ECONNREFUSED while
	// the Service rejects).
	ask := func() (string, error) {
		var who string
		err := cli.Do(t, func() error {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 40404}, &net.UDPAddr{IP: net.ParseIP("10.96.0.91"), Port: 80})
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Write([]byte("who?")); err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			buf := make([]byte, 256)
			k, err := c.Read(buf)
			if err != nil {
				return err
			}
			who, _ = bridgetest.Answerer(strings.TrimSpace(string(buf[:k])))
			return nil
		})
		return who, err
	}
	for i := 0; i < 3; i++ {
		if who, err := ask(); err == nil {
			t.Fatalf("a Service without a ready endpoint answered (%s)", who)
		}
	}
	t.Logf("conntrack while refused: %v", n.conntrack(t, "10.96.0.91"))
	updateSlice(t, n.client, "late-1", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr(true)}
	})
	n.waitGroups(t, "late should have e1", func(g []string) bool { return hasAll(g, reg3(e1)) })
	var who string
	var err error
	for i := 0; i < 5 && who == ""; i++ { // the first may go while e1's ARP resolves
		who, err = ask()
	}
	if who != "e1" {
		t.Fatalf("from the same source port, the endpoint that became ready should answer, got %q (%v); conntrack:\n%s",
			who, err, strings.Join(n.conntrack(t, "10.96.0.91"), "\n"))
	}
}

// TestLargeUDPDatagramsThroughAServiceOnRealOVS follows upstream's e2e
// "Networking Granular Checks: Services should be able to handle large
// requests: udp": a datagram larger than the pod's MTU leaves the client
// in fragments, and only the first fragment carries the UDP ports. Every
// fragment must reach the one endpoint chosen for the datagram, and the
// answer, as large and fragmented too, must come back from the Service's
// address.
func TestLargeUDPDatagramsThroughAServiceOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("udp", corev1.ProtocolUDP, 8081))
	n := newOVSNode(t, Config{},
		service("big", "10.96.0.92", svcPort("udp", corev1.ProtocolUDP, 90, 8081)),
		slice("big-1", "big", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.1.4", node: "node-1"}),
	)
	cli, e1, e2 := n.clientAndTwoEndpoints(t)
	for _, p := range []*bridgetest.Pod{e1, e2} {
		p.ServeWho(t, 8081)
	}
	n.waitGroups(t, "big should have both endpoints, in its group and its fragment group", func(g []string) bool {
		return len(g) == 2 && bucketsOf(g) == 4 && strings.Contains(g[1], "selection_method_param=4294967296")
	})
	payload := []byte(strings.Repeat("42", 2000)) // 4000 bytes: three fragments at MTU 1500
	ask := func() (string, error) { return cli.AskWhoEchoes(t, "udp4", "10.96.0.92:90", payload) }
	if _, err := ask(); err != nil { // the first may go while ARP resolves
		t.Logf("first datagram: %v", err)
	}
	seen := map[string]int{}
	for i := 0; i < 8; i++ {
		who, err := ask()
		if err != nil {
			t.Errorf("large datagram %d through the Service: %v", i, err)
			continue
		}
		seen[who]++
	}
	t.Logf("answered: %v; conntrack: %v", seen, n.conntrack(t, "10.96.0.92"))
}
