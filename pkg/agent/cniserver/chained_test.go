package cniserver

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// trafficEncapMode networkPolicyOnly, the chained ADD and DEL on a real
// OVS: the real reference ptp plugin (with host-local) runs first, as the
// primary CNI, in the node's netns, and antrea-cni after it, as the runtime
// runs a conflist. ADD answers ptp's result unchanged, takes ptp's host veth
// into br-int with the pod's flows, ARP off on it, and moves the node's route
// to the pod onto antrea-gw0; DEL gives the route back and removes the port
// and flows, and ptp's DEL then leaves nothing. About 1 s.
func TestAChainedAddTakesThePrimarysVethIntoOVSAndDelGivesItBack(t *testing.T) {
	ovsinstance.RequireRoot(t)
	ptp, err := exec.LookPath("ptp")
	if err != nil {
		ptp, _ = filepath.Abs("../../../_output/cni/bin/ptp")
	}
	if _, err := os.Stat(ptp); err != nil {
		t.Skipf("the reference ptp plugin is not installed (hack/install.sh cni): %v", err)
	}
	e := newEnvWith(t, true, nil)
	e.stopSrv()
	e.cfg.Chained, e.cfg.GatewayName = true, "antrea-gw0"
	e.startServer(true)
	ctx := ctxT(t)
	if _, err := e.ports.CreateInternalPort(ctx, "antrea-gw0", 0, "", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", e.ovs.NetNS(), "link", "set", "antrea-gw0", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set antrea-gw0 up: %v: %s", err, out)
	}
	own, err := e.srv.ConfList()
	if err != nil {
		t.Fatal(err)
	}
	var antrea struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(own, &antrea); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(mustJSON(t, map[string]any{
		"cniVersion": "1.0.0", "name": "chained-test",
		"plugins": []any{
			map[string]any{"type": "ptp", "ipMasq": false, "ipam": map[string]any{
				"type": "host-local", "dataDir": t.TempDir(),
				"ranges": []any{[]any{map[string]any{"subnet": "10.124.1.0/24"}}},
				"routes": []any{map[string]any{"dst": "0.0.0.0/0"}}}},
			antrea.Plugins[0],
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	cniConf := libcni.NewCNIConfigWithCacheDir([]string{shimDir(t), filepath.Dir(ptp)}, t.TempDir(), nil)
	// ptp makes its host end in the netns it runs in: the node's, where
	// OVS runs (never the machine's own).
	inNode := func(f func() error) error {
		return ns.WithNetNSPath("/var/run/netns/"+e.ovs.NetNS(), func(ns.NetNS) error { return f() })
	}
	p := e.newPod("chained")
	var res *current.Result
	if err := inNode(func() error {
		r, err := cniConf.AddNetworkList(ctx, list, p.rt)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(r)
		return err
	}); err != nil {
		t.Fatalf("chained ADD: %v", err)
	}
	t.Cleanup(func() { _ = inNode(func() error { return cniConf.DelNetworkList(context.Background(), list, p.rt) }) })
	var host, podIP string
	for _, itf := range res.Interfaces {
		if itf.Sandbox == "" {
			host = itf.Name
		}
	}
	if len(res.IPs) != 1 || host == "" {
		t.Fatalf("the result is not ptp's (one address, a host veth): %+v", res)
	}
	podIP = res.IPs[0].Address.IP.String()
	if !strings.HasPrefix(podIP, "10.124.1.") {
		t.Fatalf("the pod's address %s is not from ptp's range", podIP)
	}
	if ports, _ := e.ovs.Vsctl("list-ports", testBridge); !strings.Contains(ports, host) {
		t.Errorf("ptp's host veth %s is no port of %s: %s", host, testBridge, ports)
	}
	if !e.flows.PodFlowsInstalled(host) {
		t.Errorf("no flows for port %s", host)
	}
	link, _ := exec.Command("ip", "-n", e.ovs.NetNS(), "-o", "link", "show", host).CombinedOutput()
	if !strings.Contains(string(link), "NOARP") {
		t.Errorf("ARP is on on the host veth: %s", link)
	}
	route := func() string {
		out, _ := exec.Command("ip", "-n", e.ovs.NetNS(), "-o", "route", "show", podIP).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if r := route(); !strings.Contains(r, "dev antrea-gw0") || strings.Contains(r, "dev "+host) {
		t.Errorf("the node's route to the pod after ADD: %q, want it through antrea-gw0 only", r)
	}
	if err := inNode(func() error { return cniConf.CheckNetworkList(ctx, list, p.rt) }); err != nil {
		t.Errorf("chained CHECK: %v", err)
	}
	if err := inNode(func() error { return cniConf.DelNetworkList(ctx, list, p.rt) }); err != nil {
		t.Fatalf("chained DEL: %v", err)
	}
	if r := route(); r != "" {
		t.Errorf("a route to the pod is left after DEL: %q", r)
	}
	var left []string
	for _, l := range e.leftovers(t) {
		if l != "OVS port antrea-gw0" { // the test's gateway
			left = append(left, l)
		}
	}
	if len(left) > 0 {
		t.Errorf("after the chained DEL: %v", left)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
