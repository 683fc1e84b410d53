package cniserver

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

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
	if spec := os.Getenv(childEnv); spec != "" {
		runCrashingAgent(spec)
	}
	code := m.Run()
	if buildOnce.dir != "" {
		os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

// newCNIConfig is libcni with an explicit exec: libcni sets a default one
// lazily, which races when goroutines share the config (as containerd's do).
func newCNIConfig(binDir, cacheDir string) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, &invoke.DefaultExec{
		RawExec:       &invoke.RawExec{Stderr: os.Stderr},
		PluginDecoder: version.PluginDecoder{},
	})
}

// env is one node: a real OVS instance in its own netns with br-int, a
// CNIServer serving on a unix socket, and libcni set up to call the real
// antrea-cni binary.
type env struct {
	t     *testing.T
	ovs   *ovsinstance.Instance
	ports *ovsconfig.OVSBridge
	flows *ofctlFlows
	// installer is what startServer gives the server (flows by default).
	installer PodFlowInstaller
	// agentStore: startServer hands the server an interface store built
	// from OVSDB, as the agent does, instead of letting it keep its own.
	agentStore bool
	// events, when set, receives the server's pod events.
	events chan interfacestore.PodEvent
	// hostPorts, when set, installs the pods' hostPorts.
	hostPorts HostPortInstaller
	srv       *Server
	cfg       Config
	cni       *libcni.CNIConfig
	list      *libcni.NetworkConfigList
	stopSrv   func()
}

const testBridge = "br-int"

func newEnv(t *testing.T, ready bool) *env { return newEnvWith(t, ready, nil) }

// newEnvWith lets setup choose the flow installer once the bridge exists
// (nil: ofctlFlows).
func newEnvWith(t *testing.T, ready bool, setup func(e *env) PodFlowInstaller) *env {
	t.Helper()
	in := ovsinstance.StartForTest(t, "cnitest")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := ovsconfig.Connect(ctx, in.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	br := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: testBridge, DatapathType: ovsconfig.OVSDatapathNetdev})
	if err := br.Create(ctx); err != nil {
		t.Fatal(err)
	}
	// ovs-vswitchd opens the bridge's OpenFlow socket a little after the
	// OVSDB transaction.
	for {
		if _, err := in.Ofctl("show", testBridge); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bridge %s has no OpenFlow socket", testBridge)
		case <-time.After(20 * time.Millisecond):
		}
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
		ports: br,
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
	e.installer = e.flows
	if setup != nil {
		e.installer = setup(e)
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
	e.cni = newCNIConfig(shimDir(t), t.TempDir())
	return e
}

// startServer starts a CNIServer (again, after stopServer: an agent restart).
func (e *env) startServer(ready bool) {
	t := e.t
	deps := Deps{OVS: e.ports, Flows: e.installer}
	if e.events != nil {
		deps.PodEvents = e.events
	}
	deps.HostPorts = e.hostPorts
	if e.agentStore {
		// As antrea-agent does: the store is rebuilt from OVSDB at start and
		// handed to the server.
		ports, err := e.ports.GetPortList(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		deps.InterfaceStore = interfacestore.NewInterfaceStore()
		deps.InterfaceStore.Initialize(interfacestore.InterfaceConfigsFromOVSPorts(ports))
	}
	srv, err := New(e.cfg, deps)
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
func (e *env) leftovers(t *testing.T) []string {
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
	if n := e.flows.podFlowCount(t); e.installer == PodFlowInstaller(e.flows) && n > 0 {
		out = append(out, fmt.Sprintf("%d pod flows", n))
	}
	return out
}

// portContract is what the CNIServer relies on from an OVSPortClient; the
// unit tests' fakeOVS and the real OVSDB client must both pass it.
func portContract(t *testing.T, c OVSPortClient, name string) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := c.GetPortData(ctx, name); !errors.Is(err, ovsconfig.ErrNotFound) {
		t.Errorf("GetPortData of a missing port = %v, want ErrNotFound", err)
	}
	uuid, err := c.CreatePort(ctx, name, map[string]string{"k": "v"})
	if err != nil {
		t.Fatalf("CreatePort: %v", err)
	}
	ofPort, err := c.GetOFPort(ctx, name)
	if err != nil || ofPort <= 0 {
		t.Errorf("GetOFPort = %d, %v", ofPort, err)
	}
	p, err := c.GetPortData(ctx, name)
	if err != nil || p.UUID != uuid || p.ExternalIDs["k"] != "v" || p.OFPort != ofPort {
		t.Errorf("GetPortData = %+v, %v", p, err)
	}
	list, err := c.GetPortList(ctx)
	if err != nil || !slices.ContainsFunc(list, func(q ovsconfig.OVSPortData) bool { return q.Name == name }) {
		t.Errorf("GetPortList = %v, %v; want it to hold %s", list, err, name)
	}
	if err := c.DeletePort(ctx, uuid); err != nil {
		t.Errorf("DeletePort: %v", err)
	}
	if _, err := c.GetPortData(ctx, name); !errors.Is(err, ovsconfig.ErrNotFound) {
		t.Errorf("GetPortData after DeletePort = %v, want ErrNotFound", err)
	}
	if err := c.DeletePort(ctx, uuid); err != nil && !errors.Is(err, ovsconfig.ErrNotFound) {
		t.Errorf("DeletePort of a deleted port = %v, want nil or ErrNotFound", err)
	}
}
