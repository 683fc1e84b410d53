package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/interfacestore"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cniCode returns the CNI error code of err (0 if it carries none).
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func inPod(t *testing.T, p *pod, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", strings.TrimPrefix(p.netns, "/var/run/netns/")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v in pod %s: %v: %s", args, p.name, err, out)
	}
	return string(out)
}

func TestAPodGetsEth0WithItsAddressPortAndFlowsAndDelRemovesThemAll(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	p := e.newPod("web-0")
	ctx := ctxT(t)

	r, err := e.cni.AddNetworkList(ctx, e.list, p.rt)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.123.1.2/24" || !res.IPs[0].Gateway.Equal(net.ParseIP("10.123.1.1")) {
		t.Fatalf("result IPs = %v, want 10.123.1.2/24 via 10.123.1.1", res.IPs)
	}
	if len(res.Interfaces) != 2 || res.Interfaces[1].Name != "eth0" || res.Interfaces[1].Sandbox != p.netns || res.Interfaces[0].Name != e.hostIfName(p) {
		t.Fatalf("result interfaces = %+v", res.Interfaces)
	}
	if len(res.Routes) != 1 || res.Routes[0].Dst.String() != "0.0.0.0/0" {
		t.Fatalf("result routes = %v, want the default route", res.Routes)
	}

	// The pod side: eth0 with the address, the MTU, the default route via
	// the gateway and TX checksum offload off.
	link := inPod(t, p, "ip", "-o", "addr", "show", "eth0")
	if !strings.Contains(link, "10.123.1.2/24") {
		t.Errorf("eth0 addresses: %s", link)
	}
	if mtu := inPod(t, p, "cat", "/sys/class/net/eth0/mtu"); strings.TrimSpace(mtu) != "1450" {
		t.Errorf("eth0 MTU = %s, want 1450", mtu)
	}
	if route := inPod(t, p, "ip", "route", "show", "default"); !strings.Contains(route, "via 10.123.1.1 dev eth0") {
		t.Errorf("default route: %q", route)
	}
	if feat := inPod(t, p, "ethtool", "-k", "eth0"); !strings.Contains(feat, "tx-checksum-ip-generic: off") {
		t.Errorf("tx checksum offload is not off:\n%s", feat)
	}
	// The host side: ARP off, an OVS port with the pod's external_ids and an
	// OpenFlow port, the pod's flows.
	host := e.hostIfName(p)
	out, err := exec.Command("ip", "-n", e.ovs.NetNS(), "link", "show", host).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NOARP") {
		t.Errorf("host veth %s: %v %s (want NOARP)", host, err, out)
	}
	pd, err := e.ports.GetPortData(ctx, host)
	if err != nil {
		t.Fatalf("OVS port %s: %v", host, err)
	}
	if pd.OFPort <= 0 || pd.ExternalIDs[interfacestore.ExternalIDContainerID] != p.rt.ContainerID || pd.ExternalIDs[interfacestore.ExternalIDPodName] != "web-0" ||
		pd.ExternalIDs[interfacestore.ExternalIDIP] != "10.123.1.2" || pd.ExternalIDs[interfacestore.ExternalIDMAC] != res.Interfaces[1].Mac {
		t.Errorf("OVS port %s: ofport %d external_ids %v", host, pd.OFPort, pd.ExternalIDs)
	}
	if !e.flows.PodFlowsInstalled(host) {
		t.Errorf("flows of %s are not installed", host)
	}

	if err := e.cni.CheckNetworkList(ctx, e.list, p.rt); err != nil {
		t.Errorf("CHECK of a healthy pod: %v", err)
	}
	// Someone deletes the host veth by hand: CHECK names what is missing.
	if out, err := exec.Command("ip", "-n", e.ovs.NetNS(), "link", "del", host).CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	err = e.cni.CheckNetworkList(ctx, e.list, p.rt)
	if err == nil || cniCode(err) != uint(cnipb.ErrorCode_CHECK_INTERFACE_FAILURE) ||
		!strings.Contains(err.Error(), "host veth "+host+" is missing") || !strings.Contains(err.Error(), "interface eth0 is missing") {
		t.Errorf("CHECK after removing the veth = %v, want code 103 naming the host veth and eth0", err)
	}

	if err := e.cni.DelNetworkList(ctx, e.list, p.rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after DEL: %v", left)
	}
	if err := e.cni.DelNetworkList(ctx, e.list, p.rt); err != nil {
		t.Errorf("second DEL: %v", err)
	}
}

// The policy controller learns of a pod from the server's events: each
// comes once the interface store holds the pod (ADD) or no longer does (DEL).
func TestAddAndDelPublishAPodEventOnceTheStoreChanged(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	events := make(chan interfacestore.PodEvent)
	e.stopSrv()
	e.events = events
	e.startServer(true)
	p := e.newPod("web-0")
	ctx := ctxT(t)
	type seen struct {
		ev     interfacestore.PodEvent
		stored bool
	}
	got := make(chan seen, 2)
	go func() {
		for ev := range events {
			got <- seen{ev, len(e.srv.ifaces.GetContainerInterfacesByPod(ev.PodName, ev.PodNamespace)) > 0}
		}
	}()
	defer close(events)
	if _, err := e.cni.AddNetworkList(ctx, e.list, p.rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if s := <-got; s.ev.Deleted || s.ev.PodName != "web-0" || s.ev.PodNamespace != "default" || s.ev.ContainerID != p.rt.ContainerID || !s.stored {
		t.Fatalf("ADD should publish the pod once stored, got %+v", s)
	}
	if err := e.cni.DelNetworkList(ctx, e.list, p.rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if s := <-got; !s.ev.Deleted || s.ev.PodName != "web-0" || s.stored {
		t.Fatalf("DEL should publish the pod once removed, got %+v", s)
	}
}

func TestAnAddThatFailsAtAnyStepIsRolledBackCompletely(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	for _, tc := range []struct {
		step string
		code cnipb.ErrorCode
	}{
		{stepIPAM, cnipb.ErrorCode_IPAM_FAILURE},
		{stepVeth, cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE},
		{stepInterface, cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE},
		{stepOVSPort, cnipb.ErrorCode_OVS_PORT_FAILURE},
		{stepOFPort, cnipb.ErrorCode_OVS_PORT_FAILURE},
		{stepFlows, cnipb.ErrorCode_FLOW_INSTALL_FAILURE},
	} {
		t.Run("failing after "+tc.step, func(t *testing.T) {
			e.srv.inject = func(step string) error {
				if step == tc.step {
					return fmt.Errorf("injected failure at %s", step)
				}
				return nil
			}
			defer func() { e.srv.inject = nil }()
			p := e.newPod("fail-" + tc.step)
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
			if err == nil || cniCode(err) != uint(tc.code) || !strings.Contains(err.Error(), "injected failure at "+tc.step) {
				t.Fatalf("ADD = %v, want CNI error %d carrying the injected failure", err, tc.code)
			}
			if left := e.leftovers(t); len(left) > 0 {
				t.Errorf("after the failed ADD: %v", left)
			}
			if links := inPod(t, p, "ip", "-o", "link", "show"); strings.Contains(links, "eth0") {
				t.Errorf("eth0 left in the pod: %s", links)
			}
			if n := e.srv.ifaces.GetContainerInterfaceNum(); n != 0 {
				t.Errorf("%d pod interfaces recorded after a failed ADD", n)
			}
			// The same pod then comes up once the failure is gone.
			e.srv.inject = nil
			if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("ADD after the failure is gone: %v", err)
			}
			if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}

func TestFiftyConcurrentAddsThenDelsLeaveNoIPVethPortOrFlowBehind(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	const n = 50
	pods := make([]*pod, n)
	for i := range pods {
		pods[i] = e.newPod(fmt.Sprintf("load-%02d", i))
	}
	run := func(verb string, fn func(int, *pod) error) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, p := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = fn(i, p)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s of %s: %v", verb, pods[i].name, err)
			}
		}
	}
	ips := make([]string, n)
	run("ADD", func(i int, p *pod) error {
		r, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
		if err != nil {
			return err
		}
		res, err := current.NewResultFromResult(r)
		if err != nil {
			return err
		}
		ips[i] = res.IPs[0].Address.IP.String()
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	seen := map[string]bool{}
	for i, ip := range ips {
		if seen[ip] {
			t.Errorf("address %s handed out twice (pod %s)", ip, pods[i].name)
		}
		seen[ip] = true
	}
	if ports, _ := e.ovs.Vsctl("list-ports", testBridge); len(strings.Fields(ports)) != n {
		t.Errorf("%d OVS ports after %d ADDs", len(strings.Fields(ports)), n)
	}
	// Every host end kept ARP off once ovs-vswitchd had opened it (it turns
	// promiscuous mode on by writing back the flags it read: an ARP-off made
	// meanwhile was lost: 1 host veth of 5 on a lab node), and has strict
	// reverse-path filtering: the node kernel neither answers the pod's ARP
	// nor takes its packets past OVS.
	for _, p := range pods {
		host := e.hostIfName(p)
		out, err := exec.Command("ip", "-n", e.ovs.NetNS(), "link", "show", host).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "NOARP") || !strings.Contains(string(out), "PROMISC") {
			t.Errorf("host veth %s: %v %s (want NOARP, and PROMISC set by ovs-vswitchd)", host, err, out)
		}
		rp, err := exec.Command("ip", "netns", "exec", e.ovs.NetNS(), "cat", "/proc/sys/net/ipv4/conf/"+host+"/rp_filter").CombinedOutput()
		if err != nil || strings.TrimSpace(string(rp)) != "1" {
			t.Errorf("host veth %s: rp_filter %q, %v (want 1)", host, rp, err)
		}
	}
	run("DEL", func(_ int, p *pod) error { return e.cni.DelNetworkList(ctxT(t), e.list, p.rt) })
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after %d ADDs and DELs: %v", n, left)
	}
}

func TestMalformedRequestsAreRejectedNamingTheField(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	p := e.newPod("bad")
	for _, tc := range []struct {
		name   string
		change func(rt *libcni.RuntimeConf)
		code   cnipb.ErrorCode
		want   string
	}{
		{"a missing pod name", func(rt *libcni.RuntimeConf) { rt.Args = rt.Args[:2] }, cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "K8S_POD_NAME is missing"},
		{"a missing pod namespace", func(rt *libcni.RuntimeConf) { rt.Args = [][2]string{{"K8S_POD_NAME", "x"}} }, cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "K8S_POD_NAMESPACE is missing"},
		{"a netns that does not exist", func(rt *libcni.RuntimeConf) { rt.NetNS = "/var/run/netns/cnitest-none" }, cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "CNI_NETNS"},
		// skel itself rejects this one before the request reaches the agent.
		{"an interface name too long", func(rt *libcni.RuntimeConf) { rt.IfName = "eth0123456789abc" }, cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, "interface name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := *p.rt
			tc.change(&rt)
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, &rt)
			if cniCode(err) != uint(tc.code) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ADD = %v, want CNI error %d naming %q", err, tc.code, tc.want)
			}
		})
	}
	t.Run("an unsupported cniVersion", func(t *testing.T) {
		list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"0.2.0","name":"antrea","plugins":[{"type":"antrea","agentSocket":"` + e.cfg.SocketPath + `"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.cni.AddNetworkList(ctxT(t), list, p.rt)
		if cniCode(err) != uint(cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION) {
			t.Errorf("ADD = %v, want CNI error 1", err)
		}
	})
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after rejected requests: %v", left)
	}
}

func TestDelSucceedsForAPodNeverAddedTwiceAndAfterItsNetnsIsGone(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	never := e.newPod("never")
	if err := e.cni.DelNetworkList(ctxT(t), e.list, never.rt); err != nil {
		t.Errorf("DEL of a pod never added: %v", err)
	}
	p := e.newPod("gone")
	if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
		t.Fatal(err)
	}
	nsName := strings.TrimPrefix(p.netns, "/var/run/netns/")
	if out, err := exec.Command("ip", "netns", "del", nsName).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	for i := 0; i < 2; i++ {
		if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
			t.Errorf("DEL %d after the netns is gone: %v", i+1, err)
		}
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after DEL: %v", left)
	}
}

func TestARestartedServerRecoversItsPodsFromOVSAndItsAddressesFromDisk(t *testing.T) {
	ovsinstance.RequireRoot(t)
	for _, tc := range []struct {
		name       string
		agentStore bool
	}{
		{"with its own interface store", false},
		{"with the agent's interface store", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			p := e.newPod("survivor")
			if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatal(err)
			}
			e.stopSrv()
			e.agentStore = tc.agentStore
			e.startServer(true)
			if err := e.cni.CheckNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Errorf("CHECK after a restart: %v", err)
			}
			// The address is still taken: a new pod gets the next one.
			q := e.newPod("newcomer")
			r, err := e.cni.AddNetworkList(ctxT(t), e.list, q.rt)
			if err != nil {
				t.Fatal(err)
			}
			res, _ := current.NewResultFromResult(r)
			if got := res.IPs[0].Address.IP.String(); got != "10.123.1.3" {
				t.Errorf("new pod after restart got %s, want 10.123.1.3", got)
			}
			for _, pp := range []*pod{p, q} {
				if err := e.cni.DelNetworkList(ctxT(t), e.list, pp.rt); err != nil {
					t.Errorf("DEL %s: %v", pp.name, err)
				}
			}
			if left := e.leftovers(t); len(left) > 0 {
				t.Errorf("after DEL: %v", left)
			}
		})
	}
}

func TestStatusFollowsReadinessAndGCRemovesAttachmentsTheRuntimeNoLongerKnows(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, false)
	err := e.cni.GetStatusNetworkList(ctxT(t), e.list)
	if cniCode(err) != uint(cnipb.ErrorCode_PLUGIN_NOT_AVAILABLE) {
		t.Errorf("STATUS before ready = %v, want CNI error 50", err)
	}
	p, q := e.newPod("keep"), e.newPod("stale")
	_, err = e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
	if cniCode(err) != uint(cnipb.ErrorCode_TRY_AGAIN_LATER) {
		t.Errorf("ADD before ready = %v, want CNI error 11", err)
	}
	e.srv.SetReady()
	if err := e.cni.GetStatusNetworkList(ctxT(t), e.list); err != nil {
		t.Errorf("STATUS when ready: %v", err)
	}
	for _, pp := range []*pod{p, q} {
		if _, err := e.cni.AddNetworkList(ctxT(t), e.list, pp.rt); err != nil {
			t.Fatal(err)
		}
	}
	err = e.cni.GCNetworkList(ctxT(t), e.list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: p.rt.ContainerID, IfName: "eth0"}}})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if err := e.cni.CheckNetworkList(ctxT(t), e.list, p.rt); err != nil {
		t.Errorf("CHECK of the valid pod after GC: %v", err)
	}
	if _, err := e.ports.GetPortData(ctxT(t), e.hostIfName(q)); err == nil {
		t.Errorf("OVS port of the stale pod survived GC")
	}
	if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
		t.Fatal(err)
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after GC and DEL: %v", left)
	}
}

// serveOnce listens on addr inside a netns (a socket belongs to the netns it
// was created in, whichever thread later uses it) and answers one
// connection with "hello " + what it read.
func serveOnce(t *testing.T, netns, addr string) <-chan error {
	t.Helper()
	var l net.Listener
	err := ns.WithNetNSPath(netns, func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, netns, err)
	}
	t.Cleanup(func() { l.Close() })
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		_, err = c.Write([]byte("hello " + string(buf[:n])))
		served <- err
	}()
	return served
}

// talk connects from inside a netns, sends msg and returns the reply.
func talk(ctx context.Context, netns, addr, msg string) (string, error) {
	var reply string
	err := ns.WithNetNSPath(netns, func(ns.NetNS) error {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		reply = string(buf[:n])
		return err
	})
	return reply, err
}

func TestTwoPodsTalkTCPThroughTheUserspaceOVSAndReachTheNodeViaTheGateway(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	// A gateway like antrea-gw0 (an internal port with the podCIDR's first
	// address, plus a node address outside the podCIDR that pods reach only
	// through their default route) and a NORMAL flow under the pods' flows
	// stand in for the agent's pipeline, which is not what this test is
	// about: the veth set-up is (addresses, routes, MTU, the netdev fixes).
	ctx := ctxT(t)
	if _, err := e.ports.CreateInternalPort(ctx, "antrea-gw0", 0, "", nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"addr", "add", "10.123.1.1/24", "dev", "antrea-gw0"},
		{"addr", "add", "10.200.0.1/32", "dev", "antrea-gw0"},
		{"link", "set", "antrea-gw0", "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", e.ovs.NetNS()}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	if _, err := e.ovs.Ofctl("add-flow", testBridge, "priority=0,actions=normal"); err != nil {
		t.Fatal(err)
	}
	a, b := e.newPod("client"), e.newPod("server")
	var ips []string
	for _, p := range []*pod{a, b} {
		r, err := e.cni.AddNetworkList(ctx, e.list, p.rt)
		if err != nil {
			t.Fatalf("ADD %s: %v", p.name, err)
		}
		res, _ := current.NewResultFromResult(r)
		ips = append(ips, res.IPs[0].Address.IP.String())
		t.Cleanup(func() { _ = e.cni.DelNetworkList(context.Background(), e.list, p.rt) })
	}
	for _, tc := range []struct {
		name, serverNS, addr string
	}{
		{"pod to pod", b.netns, net.JoinHostPort(ips[1], "8080")},
		{"pod to the node through the default route", "/var/run/netns/" + e.ovs.NetNS(), "10.200.0.1:8081"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := serveOnce(t, tc.serverNS, tc.addr)
			reply, err := talk(ctx, a.netns, tc.addr, a.name)
			if err != nil || reply != "hello client" {
				t.Fatalf("TCP from %s (%s) to %s: reply %q, %v", a.name, ips[0], tc.addr, reply, err)
			}
			if err := <-served; err != nil {
				t.Errorf("server side: %v", err)
			}
		})
	}
}

func TestCnitoolAddsChecksAndDeletesAPod(t *testing.T) {
	ovsinstance.RequireRoot(t)
	// On PATH under hack/test.sh; otherwise where hack/install.sh puts it.
	cnitool, err := exec.LookPath("cnitool")
	if err != nil {
		cnitool, _ = filepath.Abs("../../../_output/cni/bin/cnitool")
	}
	if _, err := os.Stat(cnitool); err != nil {
		t.Skipf("cnitool is not installed (hack/install.sh cni): %v", err)
	}
	e := newEnv(t, true)
	p := e.newPod("tool")
	// cnitool keeps its result cache in /var/lib/cni/results, under the
	// network name: a name of this test's own, removed at the end.
	netName := fmt.Sprintf("cnitest-%d", os.Getpid())
	t.Cleanup(func() {
		files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", netName+"-*"))
		for _, f := range files {
			os.Remove(f)
		}
	})
	confDir := t.TempDir()
	conf, err := e.srv.ConfList()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		t.Fatal(err)
	}
	m["name"] = netName
	conf, _ = json.Marshal(m)
	if err := os.WriteFile(filepath.Join(confDir, ConfListName), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(verb string) (string, error) {
		cmd := exec.Command(cnitool, verb, netName, p.netns)
		cmd.Env = append(os.Environ(), "CNI_PATH="+shimDir(t), "NETCONFPATH="+confDir,
			"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=tool")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("add")
	if err != nil {
		t.Fatalf("cnitool add: %v: %s", err, out)
	}
	res, err := current.NewResult([]byte(out))
	if err != nil {
		t.Fatalf("cnitool add printed %s: %v", out, err)
	}
	r, _ := current.NewResultFromResult(res)
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.123.1.2/24" {
		t.Errorf("cnitool add result IPs = %v", r.IPs)
	}
	if addrs := inPod(t, p, "ip", "-o", "addr", "show", "eth0"); !strings.Contains(addrs, "10.123.1.2/24") {
		t.Errorf("eth0 after cnitool add: %s", addrs)
	}
	if out, err := run("check"); err != nil {
		t.Errorf("cnitool check: %v: %s", err, out)
	}
	if out, err := run("del"); err != nil {
		t.Errorf("cnitool del: %v: %s", err, out)
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after cnitool del: %v", left)
	}
}

func TestTheUnitTestsFakeOVSKeepsTheContractOfTheRealOVSDBClient(t *testing.T) {
	t.Run("fake", func(t *testing.T) { portContract(t, &fakeOVS{}, "contract0") })
	t.Run("real OVSDB client", func(t *testing.T) {
		ovsinstance.RequireRoot(t)
		e := newEnv(t, true)
		if out, err := exec.Command("ip", "-n", e.ovs.NetNS(), "link", "add", "contract0", "type", "veth", "peer", "name", "contract1").CombinedOutput(); err != nil {
			t.Fatalf("ip link add: %v: %s", err, out)
		}
		portContract(t, e.ports, "contract0")
	})
}
