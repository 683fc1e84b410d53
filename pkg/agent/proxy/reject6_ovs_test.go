package proxy

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// TestAnIPv6ServiceWithoutEndpointsRejectsOnRealOVS is the IPv6 half of
// TestServiceWithoutEndpointsRejectsOnRealOVS on a dual-stack node: the
// pod's own kernel judges the answers the agent builds. connect() to the
// Service's IPv6 ClusterIP fails with ECONNREFUSED (a TCP reset from the
// ClusterIP, its checksum over the IPv6 pseudo-header), and a connected UDP
// socket gets ECONNREFUSED from the ICMPv6 port unreachable (type 1 code 4)
// quoting its datagram, as ip6tables' REJECT answers for kube-proxy; a
// reply the kernel found malformed or not matching the socket would leave
// the connect and the read to time out instead.
func TestAnIPv6ServiceWithoutEndpointsRejectsOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	br.AddGatewayIPv6(t, "fd00:10:244:1::1/64")
	svc := withSpec(service("empty", "10.96.0.20", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 53)),
		func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:10:96::14"} })
	v6 := slice("empty-v6", "empty", slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("dns", corev1.ProtocolUDP, 53)),
		ep{ip: "fd00:10:244:1::3", node: "node-1", ready: ptr(false), serving: ptr(false)})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	n := newOVSNodeOn(t, br, Config{Packets: packetIns(t, br.OF), IPv6: true}, svc, v6)
	cli := n.AddPod(t, "c1", "10.10.1.2/24")
	cli.AddIPv6(t, br, "fd00:10:244:1::2/64")
	if err := n.flows.InstallPodFlows(cli.HostIF, []net.IP{cli.IP, cli.IPv6}, cli.MAC, cli.OFPort); err != nil {
		t.Fatal(err)
	}
	n.waitGroups(t, "both IPv6 ports should have their reject bucket", func(g []string) bool {
		return strings.Count(strings.Join(g, "\n"), "set_field:0x20000/0x20000->reg4") >= 2
	})

	// TCP: the first attempt may also wait for the gateway's neighbour.
	var err error
	for i := 0; i < 3; i++ {
		var c net.Conn
		start := time.Now()
		c, err = cli.Dial(t, "tcp6", "[fd00:10:96::14]:80", 5*time.Second)
		if err == nil {
			c.Close()
			t.Fatal("connect to an IPv6 Service without endpoints succeeded")
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.Logf("TCP over IPv6 to a Service without endpoints: ECONNREFUSED after %v", time.Since(start))
			break
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connect to an IPv6 Service without endpoints should be refused by a reset, got %v", err)
	}

	// UDP: the ICMPv6 port unreachable reaches the connected socket.
	c, err := cli.Dial(t, "udp6", "[fd00:10:96::14]:53", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("who?")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a UDP datagram to an IPv6 Service without endpoints should be refused by ICMPv6 port unreachable, read returned %v", err)
	}
}
