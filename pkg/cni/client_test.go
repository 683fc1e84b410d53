package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"

	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
)

// agent is a gRPC CNI server on a real unix socket that answers with canned
// responses and records the requests it got.
type agent struct {
	cnipb.UnimplementedCniServer
	resp *cnipb.CniCmdResponse
	got  map[string]*cnipb.CniCmdRequest
}

func (a *agent) record(verb string, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	a.got[verb] = r
	return a.resp, nil
}
func (a *agent) CmdAdd(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.record("ADD", r)
}
func (a *agent) CmdDel(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.record("DEL", r)
}
func (a *agent) CmdCheck(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.record("CHECK", r)
}
func (a *agent) CmdStatus(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.record("STATUS", r)
}
func (a *agent) CmdGC(_ context.Context, r *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return a.record("GC", r)
}

func startAgent(t *testing.T, resp *cnipb.CniCmdResponse) (*agent, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cnishim-") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cni.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{resp: resp, got: map[string]*cnipb.CniCmdRequest{}}
	srv := grpc.NewServer()
	cnipb.RegisterCniServer(srv, a)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return a, socket
}

func conf(socket string) []byte {
	return []byte(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea","agentSocket":"` + socket + `"}`)
}

func TestEveryVerbReachesTheAgentWithTheRuntimeArguments(t *testing.T) {
	a, socket := startAgent(t, &cnipb.CniCmdResponse{CniResult: []byte(`{"cniVersion":"1.0.0"}`)})
	var out bytes.Buffer
	c := &Client{Stdout: &out}
	args := &skel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/x", IfName: "eth0", Args: "K8S_POD_NAME=p", Path: "/opt/cni/bin", StdinData: conf(socket)}
	f := c.Funcs()
	for verb, fn := range map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del, "CHECK": f.Check, "STATUS": f.Status, "GC": f.GC} {
		if err := fn(args); err != nil {
			t.Errorf("%s: %v", verb, err)
		}
		r := a.got[verb].GetCniArgs()
		if r.GetContainerId() != "c1" || r.GetNetns() != "/var/run/netns/x" || r.GetIfname() != "eth0" || r.GetArgs() != "K8S_POD_NAME=p" ||
			r.GetPath() != "/opt/cni/bin" || !bytes.Equal(r.GetNetworkConfiguration(), args.StdinData) {
			t.Errorf("%s reached the agent as %v", verb, r)
		}
	}
	// Only ADD prints a result.
	if out.String() != `{"cniVersion":"1.0.0"}` {
		t.Errorf("stdout = %q, want the result of ADD once", out.String())
	}
}

func TestAnAgentErrorIsReturnedWithItsCNICode(t *testing.T) {
	_, socket := startAgent(t, &cnipb.CniCmdResponse{Error: &cnipb.Error{Code: cnipb.ErrorCode_IPAM_FAILURE, Message: "no address", Details: "range full"}})
	err := (&Client{Stdout: &bytes.Buffer{}}).Funcs().Add(&skel.CmdArgs{StdinData: conf(socket)})
	var e *types.Error
	if !errors.As(err, &e) || e.Code != 101 || e.Msg != "no address" || e.Details != "range full" {
		t.Errorf("ADD = %#v, want CNI error 101 with the agent's message", err)
	}
}

func TestAnUnreachableAgentIsTryAgainLater(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "nobody.sock")
	err := (&Client{}).Funcs().Add(&skel.CmdArgs{StdinData: conf(socket)})
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrTryAgainLater || !strings.Contains(e.Msg, socket) {
		t.Errorf("ADD = %#v, want CNI error 11 naming the socket", err)
	}
}

func TestANetworkConfigurationThatIsNotJSONIsADecodingFailure(t *testing.T) {
	err := (&Client{}).Funcs().Del(&skel.CmdArgs{StdinData: []byte("{")})
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrDecodingFailure {
		t.Errorf("DEL = %#v, want CNI error 6", err)
	}
}

// The binary, run the way a runtime runs it, prints an error 11 JSON on
// stdout and exits non-zero when the agent is not there.
func TestTheBinaryAnswersTryAgainLaterAndPrintsItsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the antrea-cni binary")
	}
	bin := filepath.Join(t.TempDir(), "antrea")
	if out, err := exec.Command("go", "build", "-o", bin, "antrea.io/antrea/cmd/antrea-cni").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
	cmd.Stdin = bytes.NewReader(conf(filepath.Join(t.TempDir(), "nobody.sock")))
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("ADD with no agent: %v, want a non-zero exit", err)
	}
	var e types.Error
	if jerr := json.Unmarshal(out, &e); jerr != nil || e.Code != 11 || !strings.Contains(e.Msg, "not reachable") {
		t.Errorf("stdout = %s, want CNI error 11 saying the agent is not reachable", out)
	}
	cmd = exec.Command(bin, "--version")
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "antrea-cni ") {
		t.Errorf("--version = %q, %v", out, err)
	}
	cmd = exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err = cmd.Output()
	if err != nil || !strings.Contains(string(out), `"1.1.0"`) || !strings.Contains(string(out), `"0.3.0"`) {
		t.Errorf("VERSION = %s, %v", out, err)
	}
}
