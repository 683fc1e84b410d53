package openflow

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// TrafficControl on real OVS: a Mirror of a Pod's egress copies exactly its
// packets to the target port and its connections still work; a Mirror of
// a Pod's ingress copies what it receives, not what it sends; a Redirect
// of a Pod's egress through an inline appliance (target port in, return
// port out) keeps its connections working only while the appliance passes
// the packets on.
func TestTrafficControlMirrorsAndRedirectsOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	c := initializedClient(t, br, br.OF)
	ctx := context.Background()
	pods := map[string]*bridgetest.Pod{}
	for i, name := range []string{"web", "a", "b", "mon"} {
		p := br.AddPod(t, name, strings.Replace(bridgetest.PodCIDR, ".0/24", "", 1)+"."+string(rune('3'+i))+"/24")
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	web, a, b, mon := pods["web"], pods["a"], pods["b"], pods["mon"]
	web.ServeWho(t, 8080)
	addr := net.JoinHostPort(web.IP.String(), "8080")
	mirror := bridgetest.Sniff(t, mon, "eth0")
	// As the agent does after each change: the datapath's cached flows,
	// translated before it, are purged (else packets of a known shape keep
	// their old path until OVS revalidates them).
	set := func(want TrafficControlFlows) {
		t.Helper()
		if err := c.SetTrafficControlFlows(ctx, want); err != nil {
			t.Fatal(err)
		}
		br.PurgeDatapath(t)
	}
	ask := func(why string, from *bridgetest.Pod) {
		t.Helper()
		answer, err := from.AskWho(t, "tcp4", addr, 2*time.Second)
		if who, _ := bridgetest.Answerer(answer); err != nil || who != "web" {
			t.Fatalf("%s: %s asked web, got %q, %v\nflows:\n%s", why, from.Name, answer, err, strings.Join(br.DumpFlows(t), "\n"))
		}
	}

	// Mirror a's egress to mon's port.
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "mirror-a", Ports: []uint32{a.OFPort}, Egress: true, Target: mon.OFPort}}})
	ask("a's egress mirrored", a)
	ask("a's egress mirrored", b)
	time.Sleep(200 * time.Millisecond)
	if got := mirror.Count(a.IP, web.IP); got < 3 {
		t.Errorf("the mirror saw %d of a's packets to web, want its whole exchange (3 or more)", got)
	}
	for _, other := range [][2]net.IP{{web.IP, a.IP}, {b.IP, web.IP}, {web.IP, b.IP}} {
		if got := mirror.Count(other[0], other[1]); got != 0 {
			t.Errorf("a's egress mirror saw %d packets %s>%s", got, other[0], other[1])
		}
	}

	// Mirror web's ingress instead.
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "mirror-web", Ports: []uint32{web.OFPort}, Ingress: true, Target: mon.OFPort}}})
	before := mirror.Count(a.IP, web.IP)
	ask("web's ingress mirrored", a)
	ask("web's ingress mirrored", b)
	time.Sleep(200 * time.Millisecond)
	if mirror.Count(a.IP, web.IP) <= before || mirror.Count(b.IP, web.IP) == 0 {
		t.Errorf("web's ingress mirror missed what web received: a>web %d (before %d), b>web %d",
			mirror.Count(a.IP, web.IP), before, mirror.Count(b.IP, web.IP))
	}
	if got := mirror.Count(web.IP, a.IP) + mirror.Count(web.IP, b.IP); got != 0 {
		t.Errorf("web's ingress mirror saw %d packets web sent", got)
	}

	// Redirect a's egress through an appliance: its netns holds the
	// target and return links, and passes frames from one to the other.
	app := br.AddPod(t, "tc-tgt", strings.Replace(bridgetest.PodCIDR, ".0/24", ".60/24", 1))
	appNS := app.NS
	bridgetest.Run(t, "ip", "-n", appNS, "link", "add", "ret", "type", "veth", "peer", "name", "veth-tc-ret", "netns", br.NetNS())
	bridgetest.Run(t, "ip", "-n", appNS, "link", "set", "ret", "up")
	bridgetest.Run(t, "ip", "-n", br.NetNS(), "link", "set", "veth-tc-ret", "arp", "off", "up")
	if _, err := br.Vsctl("add-port", "br-int", "veth-tc-ret"); err != nil {
		t.Fatal(err)
	}
	out, err := br.Vsctl("get", "interface", "veth-tc-ret", "ofport")
	if err != nil {
		t.Fatal(err)
	}
	var ret uint32
	for _, ch := range strings.TrimSpace(out) {
		ret = ret*10 + uint32(ch-'0')
	}
	stop := bridgetest.Forward(t, app, "eth0", "ret")
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "redirect-a", Ports: []uint32{a.OFPort}, Egress: true, Redirect: true, Target: app.OFPort}},
		ReturnPorts: []uint32{ret}})
	ask("a's egress redirected through the appliance", a)
	// web answers once a's SYN and handshake ACK reached it: both through
	// the appliance.
	if n := stop(); n < 2 {
		t.Fatalf("the appliance passed %d frames of a's exchange, want its SYN and ACK at least: a's egress did not go through it", n)
	}
	// The appliance stopped: a's traffic goes nowhere, b's is untouched.
	if answer, err := a.AskWho(t, "tcp4", addr, 700*time.Millisecond); err == nil {
		t.Fatalf("with the appliance stopped, a still reached web (%q): its egress was not redirected", answer)
	}
	ask("b is not redirected", b)

	// No rule: everything as before, and the feature's flows are gone.
	set(TrafficControlFlows{})
	ask("without TrafficControl", a)
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x100000004,") {
			t.Errorf("a TrafficControl flow stayed: %s", f)
		}
	}
}
