package cniserver

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// vsctlPorts implements OVSPortClient with ovs-vsctl against a real OVS
// instance. It lets the integration tests drive real OVS ports independently
// of the agent's OVSDB client.
type vsctlPorts struct {
	in     *ovsinstance.Instance
	bridge string
}

func (v *vsctlPorts) CreatePort(_ context.Context, name string, ids map[string]string) (string, error) {
	args := []string{"add-port", v.bridge, name}
	for k, val := range ids {
		args = append(args, "--", "set", "Port", name, fmt.Sprintf("external_ids:%s=%q", k, val))
	}
	if _, err := v.in.Vsctl(args...); err != nil {
		return "", err
	}
	return v.in.Vsctl("get", "Port", name, "_uuid")
}

func (v *vsctlPorts) DeletePort(_ context.Context, uuid string) error {
	// Removing the reference from the bridge garbage-collects the Port row.
	_, err := v.in.Vsctl("remove", "Bridge", v.bridge, "ports", uuid)
	return err
}

func (v *vsctlPorts) GetOFPort(ctx context.Context, ifName string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		out, err := v.in.Vsctl("get", "Interface", ifName, "ofport")
		if err != nil {
			return 0, err
		}
		if n, _ := strconv.Atoi(out); n != 0 {
			return int32(n), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no ofport for %s: %w", ifName, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (v *vsctlPorts) GetPortData(_ context.Context, name string) (*ovsconfig.OVSPortData, error) {
	uuid, err := v.in.Vsctl("--if-exists", "get", "Port", name, "_uuid")
	if err != nil {
		return nil, err
	}
	if uuid == "" {
		return nil, fmt.Errorf("port %s: %w", name, ovsconfig.ErrNotFound)
	}
	ofport, err := v.in.Vsctl("get", "Interface", name, "ofport")
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(ofport)
	ids, err := v.in.Vsctl("get", "Port", name, "external_ids")
	if err != nil {
		return nil, err
	}
	return &ovsconfig.OVSPortData{UUID: uuid, Name: name, IFName: name, OFPort: int32(n), ExternalIDs: parseOVSMap(ids)}, nil
}

func (v *vsctlPorts) GetPortList(ctx context.Context) ([]ovsconfig.OVSPortData, error) {
	out, err := v.in.Vsctl("list-ports", v.bridge)
	if err != nil {
		return nil, err
	}
	var ports []ovsconfig.OVSPortData
	for _, name := range strings.Fields(out) {
		p, err := v.GetPortData(ctx, name)
		if err != nil {
			return nil, err
		}
		ports = append(ports, *p)
	}
	return ports, nil
}

// parseOVSMap parses ovs-vsctl's map syntax: {a="x", b=y}.
func parseOVSMap(s string) map[string]string {
	out := map[string]string{}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	for _, kv := range strings.Split(s, ", ") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		if uq, err := strconv.Unquote(k); err == nil {
			k = uq
		}
		out[k] = v
	}
	return out
}

// ofctlFlows is a PodFlowInstaller that writes real (simple) flows into the
// bridge with ovs-ofctl, one cookie per pod port, so that tests can see with
// dump-flows whether a pod's flows are there. The real pipeline is the
// agent's openflow client; this stands in for it at the process boundary.
type ofctlFlows struct {
	in     *ovsinstance.Instance
	bridge string
}

func podCookie(ifName string) string {
	sum := sha1.Sum([]byte(ifName))
	return fmt.Sprintf("0x%x", binary.BigEndian.Uint64(sum[:8])|1)
}

func (f *ofctlFlows) InstallPodFlows(ifName string, podIPs []net.IP, podMAC net.HardwareAddr, ofPort uint32) error {
	c := podCookie(ifName)
	var flows []string
	flows = append(flows, fmt.Sprintf("cookie=%s,table=0,in_port=%d,dl_src=%s,actions=normal", c, ofPort, podMAC))
	for _, ip := range podIPs {
		flows = append(flows, fmt.Sprintf("cookie=%s,table=0,ip,nw_dst=%s,actions=output:%d", c, ip, ofPort))
	}
	file := filepath.Join(f.in.Dir(), "flows-"+ifName)
	if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(file)
	// --bundle: all of a pod's flows or none, as the real client does.
	_, err := f.in.Run("ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", f.in.BridgeMgmt(f.bridge), file)
	return err
}

func (f *ofctlFlows) UninstallPodFlows(ifName string) error {
	_, err := f.in.Ofctl("del-flows", f.bridge, "cookie="+podCookie(ifName)+"/-1")
	return err
}

func (f *ofctlFlows) PodFlowsInstalled(ifName string) bool {
	out, err := f.in.Ofctl("dump-flows", f.bridge, "cookie="+podCookie(ifName)+"/-1")
	return err == nil && strings.Contains(out, "cookie=")
}

// podFlowCount counts the flows of every pod (all flows with a cookie).
func (f *ofctlFlows) podFlowCount(t *testing.T) int {
	t.Helper()
	out, err := f.in.Ofctl("dump-flows", f.bridge)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "cookie=0x") && !strings.Contains(l, "cookie=0x0,") {
			n++
		}
	}
	return n
}

var buildOnce struct {
	sync.Once
	dir string
	err error
}

// shimDir builds the antrea-cni binary once per test run, named "antrea" as
// the conflist's type says, and returns its directory (the CNI path).
func shimDir(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "antrea-cni-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.dir = dir
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, PluginType), "antrea.io/antrea/cmd/antrea-cni").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build antrea-cni: %v: %s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

// env is one node: a real OVS instance in its own netns with br-int, a
// CNIServer serving on a unix socket, and libcni set up to call the real
// antrea-cni binary.
type env struct {
	t       *testing.T
	ovs     *ovsinstance.Instance
	ports   *vsctlPorts
	flows   *ofctlFlows
	srv     *Server
	cfg     Config
	cni     *libcni.CNIConfig
	list    *libcni.NetworkConfigList
	stopSrv func()
}

const testBridge = "br-int"

func newEnv(t *testing.T, ready bool) *env {
	t.Helper()
	in := ovsinstance.StartForTest(t, "cnitest")
	if _, err := in.Vsctl("add-br", testBridge, "--", "set", "Bridge", testBridge, "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "cnisock-") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	_, cidr, _ := net.ParseCIDR("10.123.1.0/24")
	e := &env{
		t:     t,
		ovs:   in,
		ports: &vsctlPorts{in: in, bridge: testBridge},
		flows: &ofctlFlows{in: in, bridge: testBridge},
		cfg: Config{
			SocketPath:   filepath.Join(sockDir, "cni.sock"),
			NodeName:     "node-a",
			PodCIDRs:     []*net.IPNet{cidr},
			MTU:          1450,
			IPAMDataDir:  t.TempDir(),
			ReadyTimeout: 500 * time.Millisecond,
			HostNetNS:    "/var/run/netns/" + in.NetNS(),
		},
	}
	e.startServer(ready)
	conf, err := e.srv.ConfList()
	if err != nil {
		t.Fatal(err)
	}
	e.list, err = libcni.ConfListFromBytes(conf)
	if err != nil {
		t.Fatal(err)
	}
	e.cni = libcni.NewCNIConfigWithCacheDir([]string{shimDir(t)}, t.TempDir(), nil)
	return e
}

// startServer starts a CNIServer (again, after stopServer: an agent restart).
func (e *env) startServer(ready bool) {
	t := e.t
	srv, err := New(e.cfg, Deps{OVS: e.ports, Flows: e.flows})
	if err != nil {
		t.Fatal(err)
	}
	if ready {
		srv.SetReady()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stopped := false
	e.srv = srv
	e.stopSrv = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("CNIServer.Run: %v", err)
		}
		if hl, ok := srv.ipam.(interface{ Close() error }); ok {
			hl.Close()
		}
	}
	t.Cleanup(e.stopSrv)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(e.cfg.SocketPath); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CNIServer did not create %s", e.cfg.SocketPath)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pod is a pod sandbox: a netns of its own and the runtime's view of it.
type pod struct {
	name  string
	netns string
	rt    *libcni.RuntimeConf
}

func (e *env) newPod(name string) *pod {
	e.t.Helper()
	nsName := ovsinstance.NewNetNS(e.t, "cnitest")
	p := &pod{name: name, netns: "/var/run/netns/" + nsName}
	p.rt = &libcni.RuntimeConf{
		ContainerID: "ctr-" + name + "-" + nsName,
		NetNS:       p.netns,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", "default"},
			{"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", "ctr-" + name},
		},
	}
	return p
}

func (e *env) hostIfName(p *pod) string {
	return hostInterfaceName("default", p.name, p.rt.ContainerID)
}

// leftovers lists every pod resource still present on the node: IP
// reservations, host veths, OVS ports and pod flows.
func (e *env) leftovers() []string {
	t := e.t
	t.Helper()
	var out []string
	entries, err := os.ReadDir(filepath.Join(e.cfg.IPAMDataDir, DefaultNetworkName))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if ent.Name() != "lock" && !strings.HasPrefix(ent.Name(), "last_reserved_ip") {
			out = append(out, "IP reservation "+ent.Name())
		}
	}
	links, err := exec.Command("ip", "-n", e.ovs.NetNS(), "-o", "link", "show", "type", "veth").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link: %v: %s", err, links)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(links)), "\n") {
		if l != "" {
			out = append(out, "veth "+l)
		}
	}
	ports, err := e.ovs.Vsctl("list-ports", testBridge)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(ports) {
		out = append(out, "OVS port "+p)
	}
	if n := e.flows.podFlowCount(t); n > 0 {
		out = append(out, fmt.Sprintf("%d pod flows", n))
	}
	return out
}
