package networkpolicy

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// zoneRecord is what the test's DNS server answers for a name: a CNAME to
// another name of the zone, or addresses (A records of the IPv4 ones, AAAA
// of the IPv6 ones), with a TTL.
type zoneRecord struct {
	cname string
	addrs []net.IP
	ttl   uint32
}

// testZone is a zone the test can change while it is served.
type testZone struct {
	mu sync.Mutex
	m  map[string]zoneRecord
}

func (z *testZone) set(name string, r zoneRecord) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.m[name] = r
}

func (z *testZone) answer(query []byte) ([]byte, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return dnsAnswerFor(z.m, query)
}

// serveDNS runs a DNS server (UDP and TCP port 53, on the pod's addresses
// of both families) in pod p answering from
// zone (names in lower case, without the trailing dot): the DNS server at
// the process boundary, written on golang.org/x/net/dns/dnsmessage.
func serveDNS(t *testing.T, p *bridgetest.Pod, records map[string]zoneRecord) *testZone {
	t.Helper()
	zone := &testZone{m: records}
	var ln net.Listener
	var pc net.PacketConn
	if err := p.Do(t, func() error {
		var err error
		if ln, err = net.Listen("tcp", ":53"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", ":53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); pc.Close(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if ans, err := zone.answer(buf[:k]); err == nil {
				_, _ = pc.WriteTo(ans, from)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				q, err := readTCPDNS(c)
				if err != nil {
					return
				}
				ans, err := zone.answer(q)
				if err != nil {
					return
				}
				// Length and message in two writes: the answer may
				// reach the pod in two segments.
				_, _ = c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(ans))))
				_, _ = c.Write(ans)
			}()
		}
	}()
	return zone
}

func readTCPDNS(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	m := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(r, m)
	return m, err
}

// dnsAnswerFor builds the answer to a query from zone, following CNAMEs.
func dnsAnswerFor(zone map[string]zoneRecord, query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	for range 8 {
		r, ok := zone[name]
		if !ok {
			break
		}
		rh := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name + "."), Class: dnsmessage.ClassINET, TTL: r.ttl}
		if r.cname != "" {
			if err := b.CNAMEResource(rh, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(r.cname + ".")}); err != nil {
				return nil, err
			}
			name = r.cname
			continue
		}
		for _, a := range r.addrs {
			var err error
			switch {
			case q.Type == dnsmessage.TypeA && a.To4() != nil:
				err = b.AResource(rh, dnsmessage.AResource{A: [4]byte(a.To4())})
			case q.Type == dnsmessage.TypeAAAA && a.To4() == nil:
				err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: [16]byte(a.To16())})
			}
			if err != nil {
				return nil, err
			}
		}
		break
	}
	return b.Finish()
}

// lookup resolves name (type A) from pod p against the DNS server at
// server, over UDP or TCP, as a stub resolver does, and returns the
// addresses of the answer.
func lookup(t *testing.T, p *bridgetest.Pod, server net.IP, network, name string) []netip.Addr {
	t.Helper()
	return lookupType(t, p, server, network, name, dnsmessage.TypeA)
}

// lookupType is lookup of records of type qtype (A or AAAA).
func lookupType(t *testing.T, p *bridgetest.Pod, server net.IP, network, name string, qtype dnsmessage.Type) []netip.Addr {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4242, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: qtype, Class: dnsmessage.ClassINET})
	query, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Dial(t, network, net.JoinHostPort(server.String(), "53"), 3*time.Second)
	if err != nil {
		t.Fatalf("%s lookup of %s from %s: %v", network, name, p.Name, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	var answer []byte
	if strings.HasPrefix(network, "udp") {
		if _, err := c.Write(query); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65536)
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("udp lookup of %s from %s: %v", name, p.Name, err)
		}
		answer = buf[:k]
	} else {
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(query))), query...)); err != nil {
			t.Fatal(err)
		}
		if answer, err = readTCPDNS(bufio.NewReader(c)); err != nil {
			t.Fatalf("tcp lookup of %s from %s: %v", name, p.Name, err)
		}
	}
	var ps dnsmessage.Parser
	if _, err := ps.Start(answer); err != nil {
		t.Fatal(err)
	}
	_ = ps.SkipAllQuestions()
	var out []netip.Addr
	for {
		h, err := ps.AnswerHeader()
		if err != nil {
			break
		}
		switch h.Type {
		case dnsmessage.TypeA:
			r, err := ps.AResource()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, netip.AddrFrom4(r.A))
		case dnsmessage.TypeAAAA:
			r, err := ps.AAAAResource()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, netip.AddrFrom16(r.AAAA))
		default:
			_ = ps.SkipAnswer()
		}
	}
	return out
}

// firstTCP connects once from p to addr and reads ServeWho's answer: who
// answered, and how many segments the kernel retransmitted on the
// connection (the SYN included): 0 means the very first SYN got through.
func firstTCP(t *testing.T, p *bridgetest.Pod, addr string) (who string, retrans uint32, err error) {
	t.Helper()
	c, err := p.Dial(t, "tcp", addr, 3*time.Second)
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", 0, err
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return "", 0, err
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return "", 0, err
	}
	if ierr != nil {
		return "", 0, ierr
	}
	who, _ = bridgetest.Answerer(strings.TrimSpace(line))
	return who, info.Total_retrans, nil
}

// addPod adds a pod with its flows, interface and address group ag-<name>;
// on a dual-stack node, cidr6 gives it an IPv6 address too.
func (n *policyNode) addPod(t *testing.T, name, cidr string, cidr6 ...string) *bridgetest.Pod {
	t.Helper()
	p := n.br.AddPod(t, name, cidr)
	ips := []net.IP{p.IP}
	m := member("default", name, p.IP.String())
	for _, c := range cidr6 {
		p.AddIPv6(t, n.br, c)
		ips = append(ips, p.IPv6)
		m.IPs = append(m.IPs, cpv1beta2.IPAddress(p.IPv6))
	}
	if err := n.flows.InstallPodFlows(p.HostIF, ips, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, "default", "eth0", p.MAC, ips, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
	n.store.AddInterface(iface)
	if err := n.client.Tracker().Add(&cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-" + name},
		GroupMembers: []cpv1beta2.GroupMember{m}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func egressTo(action cpv1beta2.RuleAction, to cpv1beta2.NetworkPolicyPeer, svcs ...cpv1beta2.Service) cpv1beta2.NetworkPolicyRule {
	return cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionOut, Action: &action, To: to, Services: svcs}
}

// A toFQDN rule on a real node (OVS userspace) with a real DNS server in a
// pod: the client pod a may reach the names the rule allows, and only
// once it looked them up; the first connection right after the lookup gets
// through (no retransmitted SYN, a single UDP datagram answered); exact
// names in another case, "*" patterns, CNAME chains and DNS over TCP
// (an answer in two segments) teach the agent; an address is forgotten
// once its TTL passed. About 10 s.
func TestAToFQDNRuleAllowsTheAddressesThePodLookedUpFromItsFirstConnection(t *testing.T) {
	n := newPolicyNode(t, func(_ *agentof.Client, o *Options) { o.FQDN = &FQDNOptions{} })
	dns := n.addPod(t, "dns", "10.10.1.20/24")
	webs := map[string]*bridgetest.Pod{}
	for i, name := range []string{"web1", "web2", "web3", "web4"} {
		webs[name] = n.addPod(t, name, fmt.Sprintf("10.10.1.%d/24", 10+i))
		webs[name].ServeWho(t, 8080)
	}
	webs["web2"].ServeEcho(t, 9090)
	ip := func(name string) []net.IP { return []net.IP{webs[name].IP} }
	serveDNS(t, dns, map[string]zoneRecord{
		"api.example.test":   {addrs: ip("web1"), ttl: 300},
		"other.example.test": {addrs: ip("web2"), ttl: 300},
		"shop.wild.test":     {addrs: ip("web3"), ttl: 300},
		"www.example.test":   {cname: "edge.cdn.test", ttl: 300},
		"edge.cdn.test":      {addrs: ip("web4"), ttl: 300},
		"brief.example.test": {addrs: ip("web2"), ttl: 1},
	})
	udp, tcp := cpv1beta2.ProtocolUDP, cpv1beta2.ProtocolTCP
	port53 := intstr.FromInt32(53)
	n.set(t, antreaPolicy("fqdn", tierApplication, 1, "atg-a",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-dns"}},
			cpv1beta2.Service{Protocol: &udp, Port: &port53}, cpv1beta2.Service{Protocol: &tcp, Port: &port53}),
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"api.example.test", "www.example.test", "brief.example.test", "*.wild.test"}}),
		egressTo(drop, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}}}}),
	))
	a := n.a
	web := func(name string) string { return net.JoinHostPort(webs[name].IP.String(), "8080") }
	// The policy is realized once a's traffic to the DNS server passes and
	// its other traffic drops.
	deadline := time.Now().Add(10 * time.Second)
	for dialOutcome(t, a, web("web1"), 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatal("the policy was not realized: a still reaches web1 before any lookup")
		}
	}

	mustResolve := func(network, name, want string) {
		t.Helper()
		got := lookup(t, a, dns.IP, network, name)
		if len(got) != 1 || got[0].String() != webs[want].IP.String() {
			t.Fatalf("%s resolved to %v, want %s's address %s", name, got, want, webs[want].IP)
		}
	}
	firstConnects := func(why, name string) {
		t.Helper()
		who, retrans, err := firstTCP(t, a, web(name))
		if err != nil || who != name || retrans != 0 {
			t.Fatalf("%s: the first connection to %s answered %q with %d retransmissions (err %v), want %s at the first SYN\nflows:\n%s",
				why, name, who, retrans, err, name, strings.Join(n.br.DumpFlows(t), "\n"))
		}
	}

	mustResolve("udp4", "API.Example.Test", "web1")
	firstConnects("an exact name looked up in another case over UDP", "web1")

	mustResolve("udp4", "other.example.test", "web2")
	if got := dialOutcome(t, a, web("web2"), 500*time.Millisecond); got != "timeout" {
		t.Fatalf("a name no pattern matches must stay dropped: a reached web2 (%s)", got)
	}

	mustResolve("tcp4", "shop.wild.test", "web3")
	answer, err := a.AskWho(t, "udp4", web("web3"), 2*time.Second)
	if who, _ := bridgetest.Answerer(answer); err != nil || who != "web3" {
		t.Fatalf("a name matching *.wild.test looked up over TCP: the one UDP datagram sent right after was not answered by web3: %q, %v", answer, err)
	}

	// antctl get fqdncache: the agent API serves the names looked up with
	// their addresses and the answers' TTL (300 s) as expiry; --domain
	// takes a wildcard pattern, and refuses one that is not a name.
	checkFQDNCacheAPI(t, n.ctl, map[string]string{"api.example.test": webs["web1"].IP.String(), "shop.wild.test": webs["web3"].IP.String()}, 300*time.Second)
	mustResolve("udp4", "www.example.test", "web4")
	firstConnects("a CNAME of an allowed name to a name no pattern matches", "web4")

	mustResolve("udp4", "brief.example.test", "web2")
	firstConnects("a name whose answer has a TTL of 1 s", "web2")
	// A connection that stays open keeps the address past its TTL.
	conn, err := a.Dial(t, "tcp4", net.JoinHostPort(webs["web2"].IP.String(), "9090"), 2*time.Second)
	if err != nil {
		t.Fatalf("a long connection to web2 right after its lookup: %v", err)
	}
	defer conn.Close()
	time.Sleep(2500 * time.Millisecond) // the TTL and more than one expiry round
	if got := dialOutcome(t, a, web("web2"), 2*time.Second); got != "web2" {
		t.Fatalf("web2's address expired while a connection to it lives: a new connection got %s; cache %v", got, n.ctl.FQDNCache())
	}
	if _, err := conn.Write([]byte("still there\n")); err != nil {
		t.Fatal(err)
	}
	echo, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || echo != "still there\n" {
		t.Fatalf("the long connection to web2 was cut: %q, %v", echo, err)
	}
	conn.Close()
	deadline = time.Now().Add(10 * time.Second)
	for dialOutcome(t, a, web("web2"), 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatalf("web2's address was still allowed long after its TTL of 1 s passed; cache %v", n.ctl.FQDNCache())
		}
	}
	if got := dialOutcome(t, a, web("web1"), 2*time.Second); got != "web1" {
		t.Fatalf("api.example.test's address (TTL 300 s) must stay allowed: %s", got)
	}
}

// The judge of a name whose addresses change (issue 27): a pod keeps
// resolving a name a toFQDN rule allows and connecting to what it gets
// while the name moves from web1 to web2 (TTL 1 s); every first
// connection after a lookup gets through at its first SYN; once the TTL
// passed and no connection goes to it, the old address is dropped. About
// 8 s.
func TestAToFQDNRuleFollowsANameWhoseAddressesChange(t *testing.T) {
	n := newPolicyNode(t, func(_ *agentof.Client, o *Options) { o.FQDN = &FQDNOptions{} })
	dns := n.addPod(t, "dns", "10.10.1.20/24")
	web1, web2 := n.addPod(t, "web1", "10.10.1.10/24"), n.addPod(t, "web2", "10.10.1.11/24")
	web1.ServeWho(t, 8080)
	web2.ServeWho(t, 8080)
	zone := serveDNS(t, dns, map[string]zoneRecord{"moving.example.test": {addrs: []net.IP{web1.IP}, ttl: 1}})
	udp := cpv1beta2.ProtocolUDP
	port53 := intstr.FromInt32(53)
	n.set(t, antreaPolicy("fqdn", tierApplication, 1, "atg-a",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-dns"}}, cpv1beta2.Service{Protocol: &udp, Port: &port53}),
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"moving.example.test"}}),
		egressTo(drop, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}}}}),
	))
	a := n.a
	deadline := time.Now().Add(10 * time.Second)
	for dialOutcome(t, a, net.JoinHostPort(web2.IP.String(), "8080"), 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatal("the policy was not realized: a reaches web2 before any lookup")
		}
	}
	byIP := map[string]string{web1.IP.String(): "web1", web2.IP.String(): "web2"}
	seen := map[string]int{}
	for i := range 30 {
		if i == 10 {
			zone.set("moving.example.test", zoneRecord{addrs: []net.IP{web2.IP}, ttl: 1})
		}
		got := lookup(t, a, dns.IP, "udp4", "moving.example.test")
		if len(got) != 1 {
			t.Fatalf("lookup %d: %v", i, got)
		}
		want := byIP[got[0].String()]
		who, retrans, err := firstTCP(t, a, net.JoinHostPort(got[0].String(), "8080"))
		if err != nil || who != want || retrans != 0 {
			t.Fatalf("lookup %d gave %s: the connection right after answered %q with %d retransmissions (err %v), want %s at the first SYN",
				i, got[0], who, retrans, err, want)
		}
		seen[want]++
		time.Sleep(100 * time.Millisecond)
	}
	if seen["web1"] == 0 || seen["web2"] == 0 {
		t.Fatalf("the name should have given both addresses in turn: %v", seen)
	}
	deadline = time.Now().Add(10 * time.Second)
	for dialOutcome(t, a, net.JoinHostPort(web1.IP.String(), "8080"), 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatalf("the old address stays allowed long after its TTL of 1 s passed with no connection to it; cache %v", n.ctl.FQDNCache())
		}
	}
}

// The agent resolves the exact names of its rules itself (upstream's
// behaviour), from the node: a name the pod never looked up is allowed,
// and when its record moves (TTL 1 s) the new address is allowed before
// the pod asks, the old one dropped once expired. About 6 s.
func TestTheAgentResolvesTheExactNamesOfToFQDNRulesItself(t *testing.T) {
	var node *bridgetest.Pod
	n := newPolicyNode(t, func(_ *agentof.Client, o *Options) {
		o.FQDN = &FQDNOptions{DNSServer: "10.10.1.20:53", Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			err := node.Do(t, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		}}
	})
	node = n.br.NodeHost("node")
	dns := n.addPod(t, "dns", "10.10.1.20/24")
	web1, web2 := n.addPod(t, "web1", "10.10.1.10/24"), n.addPod(t, "web2", "10.10.1.11/24")
	web1.ServeWho(t, 8080)
	web2.ServeWho(t, 8080)
	zone := serveDNS(t, dns, map[string]zoneRecord{"pre.example.test": {addrs: []net.IP{web1.IP}, ttl: 2}})
	n.set(t, antreaPolicy("fqdn", tierApplication, 1, "atg-a",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"pre.example.test"}}),
		egressTo(drop, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}}}}),
	))
	a := n.a
	// The pod never asks: its DNS is not even allowed.
	n.expect2(t, "the agent's own lookup allows the name's address", a, web1, "web1")
	n.expect2(t, "web2 is no address of the name yet", a, web2, "timeout")
	zone.set("pre.example.test", zoneRecord{addrs: []net.IP{web2.IP}, ttl: 2})
	n.expect2(t, "the agent asks again as the TTL ends and allows the new address", a, web2, "web2")
	n.expect2(t, "the old address is dropped once its TTL passed", a, web1, "timeout")
}

// expect2 waits (bounded) until client c sees want connecting to web:8080.
func (n *policyNode) expect2(t *testing.T, why string, c, web *bridgetest.Pod, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := dialOutcome(t, c, net.JoinHostPort(web.IP.String(), "8080"), 300*time.Millisecond)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s from %s got %s, want %s; cache %v", why, web.Name, c.Name, got, want, n.ctl.FQDNCache())
		}
	}
}

// checkFQDNCacheAPI asks the FQDN cache handler as antctl does: every name
// of want is there with its address, expiring one ttl after its answer
// (now at the latest, ttl+10 s before now at the earliest); ?domain= with a
// wildcard keeps only the names it matches; an invalid pattern is refused
// naming the parameter.
func checkFQDNCacheAPI(t *testing.T, c *Controller, want map[string]string, ttl time.Duration) {
	t.Helper()
	h := c.FQDNCacheHandler()
	get := func(query string) (int, string, []apis.FQDNCacheEntry) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, FQDNCachePath+query, nil))
		var out []apis.FQDNCacheEntry
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("GET %s%s: %v", FQDNCachePath, query, err)
			}
		}
		return rec.Code, rec.Body.String(), out
	}
	now := time.Now()
	_, _, all := get("")
	for name, addr := range want {
		found := false
		for _, e := range all {
			if e.FQDNName == name && e.IPAddress == addr {
				found = true
				if e.ExpirationTime.After(now.Add(ttl)) || e.ExpirationTime.Before(now.Add(ttl-10*time.Second)) {
					t.Errorf("fqdncache: %s %s expires at %v, want about %v after its answer (now %v)", name, addr, e.ExpirationTime, ttl, now)
				}
			}
		}
		if !found {
			t.Errorf("fqdncache lacks %s -> %s: %+v", name, addr, all)
		}
	}
	_, _, wild := get("?domain=" + url.QueryEscape("*.WILD.test"))
	for _, e := range wild {
		if !strings.HasSuffix(e.FQDNName, ".wild.test") {
			t.Errorf("fqdncache --domain *.wild.test lists %s", e.FQDNName)
		}
	}
	if len(wild) == 0 {
		t.Errorf("fqdncache --domain *.wild.test lists nothing; all: %+v", all)
	}
	if code, body, _ := get("?domain=" + url.QueryEscape("bad name!")); code != http.StatusBadRequest || !strings.Contains(body, "domain") {
		t.Errorf("fqdncache --domain 'bad name!': %d %q, want 400 naming domain", code, body)
	}
}
