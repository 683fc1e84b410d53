package cniserver

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

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
	if pd.OFPort <= 0 || pd.ExternalIDs[ExternalIDContainerID] != p.rt.ContainerID || pd.ExternalIDs[ExternalIDPodName] != "web-0" ||
		pd.ExternalIDs[ExternalIDIP] != "10.123.1.2" || pd.ExternalIDs[ExternalIDMAC] != res.Interfaces[1].Mac {
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
	if left := e.leftovers(); len(left) > 0 {
		t.Errorf("after DEL: %v", left)
	}
	if err := e.cni.DelNetworkList(ctx, e.list, p.rt); err != nil {
		t.Errorf("second DEL: %v", err)
	}
}
