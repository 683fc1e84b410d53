package cni

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
)

// Fuzz targets of the antrea-cni shim (issue 17 item 8). Run one with:
//
//	nice -n 10 go test -run '^$' -fuzz FuzzShimRequest -fuzztime 60s ./pkg/cni
//
// Crashers land in testdata/fuzz/<target> and run in every `go test`.

// recordingAgent answers every verb with success and keeps the last request.
type recordingAgent struct {
	cnipb.UnimplementedCniServer
	mu   sync.Mutex
	last *cnipb.CniCmdRequest
}

func (a *recordingAgent) ok(r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = r
	return &cnipb.CniCmdResponse{CniResult: []byte(`{"cniVersion":"1.0.0"}`)}, nil
}
func (a *recordingAgent) CmdAdd(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.ok(r)
}
func (a *recordingAgent) CmdDel(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.ok(r)
}
func (a *recordingAgent) CmdCheck(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.ok(r)
}
func (a *recordingAgent) CmdStatus(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.ok(r)
}
func (a *recordingAgent) CmdGC(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.ok(r)
}

func (a *recordingAgent) take() *cnipb.CniCmdRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.last
	a.last = nil
	return r
}

// shimErrorCodes are the CNI spec codes the shim may answer a malformed
// invocation with (spec "Error codes": 1 incompatible version, 2 unsupported
// field, 3 unknown container, 4 invalid environment variables, 6 decoding
// failure, 7 invalid network configuration). 999 (internal) is not among
// them: it would mean the shim failed on input it should have refused.
var shimErrorCodes = []uint{1, 2, 3, 4, 6, 7}

var shimCommands = []string{"ADD", "DEL", "CHECK", "STATUS", "GC"}

// FuzzShimRequest runs the shim as the runtime does (skel reading CNI_*
// variables and the network configuration on stdin) against an agent that
// always succeeds. The invocation either reaches the agent carrying exactly
// the runtime's arguments, or is refused with a CNI spec error code for
// malformed input.
func FuzzShimRequest(f *testing.F) {
	dir, err := os.MkdirTemp("", "cnifuzz-") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cni.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		f.Fatal(err)
	}
	agent := &recordingAgent{}
	srv := grpc.NewServer()
	cnipb.RegisterCniServer(srv, agent)
	go func() { _ = srv.Serve(l) }()
	f.Cleanup(srv.Stop)

	kubelet := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c1"
	conf := `{"cniVersion":"1.0.0","name":"antrea","type":"antrea"}`
	for _, s := range []struct {
		cmd                                 uint8
		conf, id, netns, ifname, args, path string
	}{
		{0, conf, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{1, conf, "c1", "", "eth0", "", "/opt/cni/bin"},
		{2, `{"cniVersion":"1.0.0","name":"antrea","type":"antrea","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.5/24"}]}}`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{3, `{"cniVersion":"1.1.0","name":"antrea","type":"antrea"}`, "", "", "", "", "/opt/cni/bin"},
		{4, `{"cniVersion":"1.1.0","name":"antrea","type":"antrea","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`, "", "", "", "", "/opt/cni/bin"},
		{0, `{"cniVersion":"0.3.1","name":"antrea","type":"antrea"}`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{2, `{"cniVersion":"0.3.1","name":"antrea","type":"antrea"}`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{0, `{"cniVersion":"2.0.0","name":"antrea"}`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{0, `{"cniVersion":"1.0.0","name":"a b"}`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{0, `{`, "c1", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{0, conf, "c1", "/var/run/netns/x", "eth0", "K8S_POD_NAME=\xff", "/opt/cni/bin"},
		{0, conf, "c1", "/var/run/netns/\xfe", "eth0", kubelet, "/opt/cni/bin"},
		{0, conf, "c1;x", "/var/run/netns/x", "eth0", kubelet, "/opt/cni/bin"},
		{0, conf, "c1", "/var/run/netns/x", "eth0:1", kubelet, "/opt/cni/bin"},
		{0, conf, "c1", "", "eth0", kubelet, ""},
	} {
		f.Add(s.cmd, []byte(s.conf), s.id, s.netns, s.ifname, s.args, s.path)
	}
	f.Fuzz(func(t *testing.T, cmd uint8, stdin []byte, containerID, netns, ifName, args, path string) {
		// The agent's socket comes from the configuration; a fuzzed
		// "agentSocket" would point elsewhere, so it is overwritten.
		stdin = []byte(strings.ReplaceAll(string(stdin), "agentSocket", "agentSocketX"))
		stdin = withSocket(stdin, socket)
		env := map[string]string{
			"CNI_COMMAND": shimCommands[int(cmd)%len(shimCommands)], "CNI_CONTAINERID": containerID,
			"CNI_NETNS": netns, "CNI_IFNAME": ifName, "CNI_ARGS": args, "CNI_PATH": path,
		}
		if s, err := agentSocket(stdin); err == nil && s != socket {
			t.Skip() // not a JSON object: the shim would call the node's real agent
		}
		for k, v := range env {
			if strings.ContainsRune(k+v, 0) {
				t.Skip() // an environment cannot hold NUL
			}
		}
		c := &Client{Stdout: io.Discard, Timeout: 10 * time.Second}
		err := runSkel(t, c, env, stdin)
		got := agent.take()
		if err != nil {
			if !slices.Contains(shimErrorCodes, err.Code) {
				t.Fatalf("%s refused with code %d (%s: %s), not a spec code for malformed input", env["CNI_COMMAND"], err.Code, err.Msg, err.Details)
			}
			return
		}
		if got == nil {
			t.Fatalf("%s succeeded without reaching the agent", env["CNI_COMMAND"])
		}
		a := got.GetCniArgs()
		if a.GetContainerId() != containerID || a.GetNetns() != netns || a.GetIfname() != ifName || a.GetArgs() != args || a.GetPath() != path ||
			string(a.GetNetworkConfiguration()) != string(stdin) {
			t.Fatalf("the agent got %v, the runtime gave %v with stdin %q", a, env, stdin)
		}
	})
}

// withSocket points a JSON object at socket, leaving anything else as is.
func withSocket(stdin []byte, socket string) []byte {
	s := strings.TrimLeft(string(stdin), " \t\r\n")
	if !strings.HasPrefix(s, "{") {
		return stdin
	}
	rest := strings.TrimLeft(s[1:], " \t\r\n")
	sep := ","
	if strings.HasPrefix(rest, "}") {
		sep = ""
	}
	return []byte(`{"agentSocket":"` + socket + `"` + sep + rest)
}

// runSkel runs skel's entry point with env as the environment and stdin as
// standard input, as the runtime would run the antrea-cni binary.
func runSkel(t *testing.T, c *Client, env map[string]string, stdin []byte) *types.Error {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	in := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(in, stdin, 0o600); err != nil {
		t.Fatal(err)
	}
	fin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer fin.Close()
	saved := os.Stdin
	os.Stdin = fin
	defer func() { os.Stdin = saved }()
	return skel.PluginMainFuncsWithError(c.Funcs(), PluginInfo(), "antrea-cni fuzz")
}

// FuzzAgentSocket checks the shim's own reading of the network
// configuration: an undecodable one is CNI error 6, anything else names a
// socket (the configured one, or the default).
func FuzzAgentSocket(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"1.0.0","name":"antrea","type":"antrea"}`,
		`{"cniVersion":"1.0.0","name":"antrea","agentSocket":"/run/x.sock"}`,
		`{"agentSocket":""}`, `{"agentSocket":1}`, `null`, `[]`, `{`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		socket, err := agentSocket(stdin)
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != types.ErrDecodingFailure || !strings.Contains(e.Msg, "network configuration") {
				t.Fatalf("refusal %v: want CNI error 6 naming the network configuration", err)
			}
			return
		}
		if socket == "" {
			t.Fatalf("no socket from %q", stdin)
		}
	})
}

// FuzzNewRequest checks the request the shim builds: refused with CNI error 4
// naming the variable, or one that survives the protobuf wire unchanged.
func FuzzNewRequest(f *testing.F) {
	f.Add("c1", "/var/run/netns/x", "eth0", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", "/opt/cni/bin", []byte(`{"cniVersion":"1.0.0"}`))
	f.Add("c1", "/var/run/netns/x", "eth0", "K8S_POD_NAME=\xff", "", []byte("\xff"))
	f.Fuzz(func(t *testing.T, id, netns, ifName, args, path string, stdin []byte) {
		req, err := newRequest(&skel.CmdArgs{ContainerID: id, Netns: netns, IfName: ifName, Args: args, Path: path, StdinData: stdin})
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(e.Msg, "CNI_") {
				t.Fatalf("refusal %v: want CNI error 4 naming the variable", err)
			}
			return
		}
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not marshal: %v", err)
		}
		var back cnipb.CniCmdRequest
		if err := proto.Unmarshal(wire, &back); err != nil {
			t.Fatalf("accepted request does not unmarshal: %v", err)
		}
		if !proto.Equal(req, &back) {
			t.Fatalf("request %v came back as %v", req, &back)
		}
	})
}
