package cniserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// childEnv, when set, makes this test binary a CNI server process (an
// agent) that kills itself with SIGKILL after the ADD step it names: the
// state a crashed agent leaves, exactly, with no rollback.
const childEnv = "ANTREA_CNITEST_CRASHING_AGENT"

type crashingAgent struct {
	Config  Config
	OVSDir  string
	OVSNS   string
	CIDR    string
	CrashAt string
}

// runCrashingAgent is the child's main (called from TestMain).
func runCrashingAgent(spec string) {
	var a crashingAgent
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		fmt.Fprintln(os.Stderr, "bad spec:", err)
		os.Exit(2)
	}
	_, cidr, err := net.ParseCIDR(a.CIDR)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	a.Config.PodCIDRs = []*net.IPNet{cidr}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := ovsinstance.New(ovsinstance.Config{Dir: a.OVSDir, NetNS: a.OVSNS})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	conn, err := ovsconfig.Connect(ctx, in.DBEndpoint())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	br := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: testBridge, DatapathType: ovsconfig.OVSDatapathNetdev})
	srv, err := New(a.Config, Deps{OVS: br, Flows: &ofctlFlows{in: in, bridge: testBridge}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv.inject = func(step string) error {
		if step == a.CrashAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}
	srv.SetReady()
	_ = srv.Run(ctx)
	os.Exit(3) // not killed within a minute: the parent sees it
}

// startCrashingAgent runs this test binary as the node's agent (serving
// e.cfg's socket, IPAM dir and OVS), SIGKILLing itself after ADD step crashAt,
// and waits until it serves. exited closes when it has exited, with its
// wait error in *waitErr; the test's cleanup kills it if still there.
func (e *env) startCrashingAgent(t *testing.T, crashAt string) (exited chan struct{}, waitErr *error) {
	t.Helper()
	os.Remove(e.cfg.SocketPath)
	spec, _ := json.Marshal(crashingAgent{Config: Config{SocketPath: e.cfg.SocketPath, NodeName: e.cfg.NodeName, MTU: e.cfg.MTU,
		IPAMDataDir: e.cfg.IPAMDataDir, ReadyTimeout: e.cfg.ReadyTimeout, HostNetNS: e.cfg.HostNetNS},
		OVSDir: e.ovs.Dir(), OVSNS: e.ovs.NetNS(), CIDR: e.cfg.PodCIDRs[0].String(), CrashAt: crashAt})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+string(spec))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited, waitErr = make(chan struct{}), new(error)
	go func() { *waitErr = child.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
	})
	waitFor(t, "the crashing agent's socket", func() bool { _, err := os.Stat(e.cfg.SocketPath); return err == nil })
	return exited, waitErr
}

// An agent killed in the middle of an ADD (after each step) leaves what it
// made so far; the runtime's ADD fails with "try again later", the runtime
// then DELs the sandbox (as containerd does after a failed ADD) through the
// restarted agent, and that DEL removes every IP, veth, OVS port and flow.
// The same pod then comes up.
func TestAnAgentKilledMidAddLeavesNothingOnceTheRuntimeDeletes(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	e.stopSrv() // the child process is the agent until it dies
	for _, step := range []string{stepIPAM, stepVeth, stepOVSPort, stepInterface, stepOFPort, stepFlows} {
		t.Run("after "+step, func(t *testing.T) {
			exited, waitErr := e.startCrashingAgent(t, step)

			p := e.newPod("crash-" + step)
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
			if cniCode(err) != uint(types.ErrTryAgainLater) {
				t.Fatalf("ADD while the agent dies: %v, want CNI error %d (try again later)", err, types.ErrTryAgainLater)
			}
			<-exited
			if err := *waitErr; err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("the agent was to die by SIGKILL after %s: %v", step, err)
			}
			// The agent restarts from what is on disk and in OVSDB.
			e.agentStore = true
			e.startServer(true)
			defer e.stopSrv()
			if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("DEL after the crash: %v", err)
			}
			if left := e.leftovers(t); len(left) > 0 {
				t.Errorf("after the crash after %s and the runtime's DEL: %v", step, left)
			}
			if n := e.srv.ifaces.GetContainerInterfaceNum(); n != 0 {
				t.Errorf("%d interfaces in the store after the DEL", n)
			}
			if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("ADD again: %v", err)
			}
			if !e.flows.PodFlowsInstalled(e.hostIfName(p)) {
				t.Errorf("the pod's flows are missing after the ADD that followed the crash")
			}
			if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}

// A runtime that retries the ADD of a sandbox whose ADD died with the agent
// (instead of deleting it first) gets a pod that works, not the half-made
// interface the crash left.
func TestAnAddRetriedAfterTheAgentDiedMidAddCompletesThePod(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	e.stopSrv()
	for _, step := range []string{stepOVSPort, stepInterface, stepOFPort} {
		t.Run("after "+step, func(t *testing.T) {
			exited, _ := e.startCrashingAgent(t, step)
			p := e.newPod("retry-" + step)
			if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); cniCode(err) != uint(types.ErrTryAgainLater) {
				t.Fatalf("ADD while the agent dies: %v", err)
			}
			<-exited
			e.agentStore = true
			e.startServer(true)
			defer e.stopSrv()
			if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("ADD retried after the restart: %v", err)
			}
			if !e.flows.PodFlowsInstalled(e.hostIfName(p)) {
				t.Errorf("the retried ADD succeeded but the pod has no flows")
			}
			if out := inPod(t, p, "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(out, "10.123.1.") {
				t.Errorf("the retried ADD succeeded but eth0 has no address: %s", out)
			}
			if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if left := e.leftovers(t); len(left) > 0 {
				t.Errorf("after DEL: %v", left)
			}
		})
	}
}

// faultCalls is how many CNI calls TestAThousandFaultyCallsLeaveNothingBehind
// makes: 1,000 under `make reliability` (ANTREA_RELIABILITY=1), 200 otherwise.
func faultCalls() int {
	if os.Getenv("ANTREA_RELIABILITY") != "" {
		return 1000
	}
	return 200
}

// Many CNI calls, most of them faulty, in a random (seeded, logged) order on
// a pool of pods: an ADD failing at a random step, the pod's netns gone, DEL twice, ADD of a pod that is there, malformed CNI_ARGS, an
// unsupported cniVersion, and plain ADDs and DELs. Each call gets the CNI
// error code its fault calls for and a message naming the cause; afterwards
// no IP, veth, OVS port, flow or interface-store entry is left.
func TestAThousandFaultyCallsLeaveNothingBehind(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ANTREA_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (ANTREA_FAULT_SEED=%d repeats this order)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const poolSize = 8
	pods := make([]*pod, poolSize)
	added := make([]bool, poolSize)
	for i := range pods {
		pods[i] = e.newPod(fmt.Sprintf("f%d", i))
	}
	badVersion, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"0.2.0","name":"antrea","plugins":[{"type":"antrea","agentSocket":"` + e.cfg.SocketPath + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		code cnipb.ErrorCode
	}{{stepIPAM, cnipb.ErrorCode_IPAM_FAILURE}, {stepVeth, cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE},
		{stepOVSPort, cnipb.ErrorCode_OVS_PORT_FAILURE}, {stepInterface, cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE},
		{stepOFPort, cnipb.ErrorCode_OVS_PORT_FAILURE}, {stepFlows, cnipb.ErrorCode_FLOW_INSTALL_FAILURE}}
	counts := map[string]int{}
	expect := func(what string, err error, code uint, text string) {
		t.Helper()
		counts[what]++
		if code == 0 {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		}
		if cniCode(err) != code || !strings.Contains(err.Error(), text) {
			t.Fatalf("%s: got %v, want CNI error %d mentioning %q", what, err, code, text)
		}
	}
	n := faultCalls()
	deadline := time.Now().Add(10 * time.Minute)
	for call := 0; call < n; call++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls in 10 minutes", call, n)
		}
		i := rng.IntN(poolSize)
		p := pods[i]
		switch k := rng.IntN(10); {
		case k == 0 && !added[i]: // an ADD failing after a random step
			s := steps[rng.IntN(len(steps))]
			e.srv.inject = func(step string) error {
				if step == s.name {
					return fmt.Errorf("injected failure at %s", step)
				}
				return nil
			}
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
			e.srv.inject = nil
			expect("ADD failing at "+s.name, err, uint(s.code), "injected failure at "+s.name)
		case k == 2 && !added[i]: // the pod's netns is gone
			rt := *p.rt
			rt.NetNS = "/var/run/netns/cnitest-gone-" + strconv.Itoa(call)
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, &rt)
			expect("ADD into a netns that is gone", err, uint(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES), "CNI_NETNS")
		case k == 3: // malformed CNI_ARGS
			rt := *p.rt
			rt.Args = [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}}
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, &rt)
			expect("ADD without K8S_POD_NAME", err, uint(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES), "K8S_POD_NAME")
		case k == 4: // an unsupported cniVersion
			_, err := e.cni.AddNetworkList(ctxT(t), badVersion, p.rt)
			expect("ADD with cniVersion 0.2.0", err, uint(cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION), "")
		case k <= 6 && added[i]: // DEL, sometimes twice
			expect("DEL", e.cni.DelNetworkList(ctxT(t), e.list, p.rt), 0, "")
			if rng.IntN(2) == 0 {
				expect("DEL again", e.cni.DelNetworkList(ctxT(t), e.list, p.rt), 0, "")
			}
			added[i] = false
		case added[i]: // ADD of a pod that is there: the same result
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
			expect("ADD of a pod that is there", err, 0, "")
		default:
			_, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt)
			expect("ADD", err, 0, "")
			added[i] = true
		}
	}
	for i, p := range pods {
		if added[i] {
			expect("DEL", e.cni.DelNetworkList(ctxT(t), e.list, p.rt), 0, "")
		}
	}
	t.Logf("%d calls: %v", n, counts)
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after %d calls and the DEL of every pod: %v", n, left)
	}
	if c := e.srv.ifaces.GetContainerInterfaceNum(); c != 0 {
		t.Errorf("%d interfaces left in the store", c)
	}
}

// waitFor polls cond for at most 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the node's pod CIDR has no free address, ADD fails with an IPAM error
// that says so and leaves nothing; a DEL frees an address for the next pod.
func TestAnAddOnAFullPodCIDRFailsCleanlyAndADelMakesRoom(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnv(t, true)
	e.stopSrv()
	_, small, _ := net.ParseCIDR("10.123.9.0/29") // .1 is the gateway: .2 to .6 for pods
	e.cfg.PodCIDRs = []*net.IPNet{small}
	e.startServer(true)
	var pods []*pod
	for i := range 5 {
		p := e.newPod(fmt.Sprintf("full-%d", i))
		if _, err := e.cni.AddNetworkList(ctxT(t), e.list, p.rt); err != nil {
			t.Fatalf("ADD %d of 5: %v", i+1, err)
		}
		pods = append(pods, p)
	}
	extra := e.newPod("full-extra")
	_, err := e.cni.AddNetworkList(ctxT(t), e.list, extra.rt)
	if cniCode(err) != uint(cnipb.ErrorCode_IPAM_FAILURE) || !strings.Contains(err.Error(), "no address left") {
		t.Fatalf("ADD on a full pod CIDR: %v, want CNI error %d saying no address is left", err, cnipb.ErrorCode_IPAM_FAILURE)
	}
	if links := inPod(t, extra, "ip", "-o", "link", "show"); strings.Contains(links, "eth0") {
		t.Errorf("eth0 left in the pod after the failed ADD: %s", links)
	}
	if err := e.cni.DelNetworkList(ctxT(t), e.list, pods[2].rt); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cni.AddNetworkList(ctxT(t), e.list, extra.rt); err != nil {
		t.Fatalf("ADD once an address is free: %v", err)
	}
	for _, p := range append(pods, extra) {
		if err := e.cni.DelNetworkList(ctxT(t), e.list, p.rt); err != nil {
			t.Errorf("DEL %s: %v", p.name, err)
		}
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("after DEL: %v", left)
	}
}
