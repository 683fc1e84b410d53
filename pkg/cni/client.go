// Package cni is the logic of the antrea-cni shim: it turns each CNI verb the
// container runtime runs (ADD, CHECK, DEL, STATUS, GC) into a gRPC call to the
// local antrea-agent's CNIServer and prints the agent's answer back in the form
// the CNI spec expects. It holds no networking logic.
package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
)

// DefaultAgentSocket is where antrea-agent serves the CNI API unless the
// network configuration says otherwise ("agentSocket").
const DefaultAgentSocket = "/var/run/antrea/cni.sock"

// DefaultTimeout bounds one call to the agent. It is longer than the agent's
// own wait for readiness so that a slow-starting agent answers "try again
// later" itself rather than the shim timing out first.
const DefaultTimeout = 2 * time.Minute

// SupportedVersions are the CNI spec versions the shim (and the agent) speak.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// PluginInfo is the version information skel reports for VERSION.
func PluginInfo() version.PluginInfo { return version.PluginSupports(SupportedVersions...) }

// NetConf is the part of the network configuration the shim reads itself.
type NetConf struct {
	types.NetConf
	// AgentSocket overrides DefaultAgentSocket.
	AgentSocket string `json:"agentSocket,omitempty"`
}

// Client forwards CNI verbs to the agent. The zero value is usable.
type Client struct {
	// Stdout receives the result of ADD; os.Stdout when nil.
	Stdout io.Writer
	// Timeout bounds each call; DefaultTimeout when zero.
	Timeout time.Duration
}

type verb int

const (
	verbAdd verb = iota
	verbCheck
	verbDel
	verbStatus
	verbGC
)

func (v verb) String() string {
	return [...]string{"ADD", "CHECK", "DEL", "STATUS", "GC"}[v]
}

// Funcs returns the skel callbacks of every verb.
func (c *Client) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return c.forward(a, verbAdd) },
		Check:  func(a *skel.CmdArgs) error { return c.forward(a, verbCheck) },
		Del:    func(a *skel.CmdArgs) error { return c.forward(a, verbDel) },
		Status: func(a *skel.CmdArgs) error { return c.forward(a, verbStatus) },
		GC:     func(a *skel.CmdArgs) error { return c.forward(a, verbGC) },
	}
}

// agentSocket reads the socket path from the network configuration.
func agentSocket(stdin []byte) (string, error) {
	var conf NetConf
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return "", types.NewError(types.ErrDecodingFailure, "cannot decode the network configuration", err.Error())
	}
	if conf.AgentSocket != "" {
		return conf.AgentSocket, nil
	}
	return DefaultAgentSocket, nil
}

// newRequest is the gRPC request of the runtime's arguments. The CNI_*
// variables travel as protobuf strings, which must be UTF-8: anything else
// would fail in the gRPC marshaller as an internal error, so it is refused
// here as the malformed environment it is (CNI spec error 4).
func newRequest(args *skel.CmdArgs) (*cnipb.CniCmdRequest, error) {
	for _, v := range []struct{ name, value string }{
		{"CNI_CONTAINERID", args.ContainerID},
		{"CNI_NETNS", args.Netns},
		{"CNI_IFNAME", args.IfName},
		{"CNI_ARGS", args.Args},
		{"CNI_PATH", args.Path},
	} {
		if !utf8.ValidString(v.value) {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("%s %q is not valid UTF-8", v.name, v.value), "")
		}
	}
	return &cnipb.CniCmdRequest{CniArgs: &cnipb.CniCmdArgs{
		ContainerId:          args.ContainerID,
		Netns:                args.Netns,
		Ifname:               args.IfName,
		Args:                 args.Args,
		Path:                 args.Path,
		NetworkConfiguration: args.StdinData,
	}}, nil
}

func (c *Client) forward(args *skel.CmdArgs, v verb) error {
	socket, err := agentSocket(args.StdinData)
	if err != nil {
		return err
	}
	req, err := newRequest(args)
	if err != nil {
		return err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("cannot set up a connection to antrea-agent at %s", socket), err.Error())
	}
	defer conn.Close()
	client := cnipb.NewCniClient(conn)
	var resp *cnipb.CniCmdResponse
	switch v {
	case verbAdd:
		resp, err = client.CmdAdd(ctx, req)
	case verbCheck:
		resp, err = client.CmdCheck(ctx, req)
	case verbDel:
		resp, err = client.CmdDel(ctx, req)
	case verbStatus:
		resp, err = client.CmdStatus(ctx, req)
	case verbGC:
		resp, err = client.CmdGC(ctx, req)
	}
	if err != nil {
		return rpcError(err, socket, v)
	}
	if e := resp.GetError(); e != nil {
		return &types.Error{Code: uint(e.GetCode()), Msg: e.GetMessage(), Details: e.GetDetails()}
	}
	if v == verbAdd {
		out := c.Stdout
		if out == nil {
			out = os.Stdout
		}
		if _, err := out.Write(resp.GetCniResult()); err != nil {
			return types.NewError(types.ErrIOFailure, "cannot write the CNI result", err.Error())
		}
	}
	return nil
}

// rpcError maps a failed call to a CNI error. An agent that is not there (no
// socket, not listening, restarting) or too slow is a transient condition for
// the runtime, which retries: CNI error 11 "try again later".
func rpcError(err error, socket string, v verb) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("antrea-agent is not reachable at %s (is it running?); %s not done, try again later", socket, v),
			err.Error())
	default:
		return types.NewError(types.ErrInternal, fmt.Sprintf("CNI %s call to antrea-agent at %s failed", v, socket), err.Error())
	}
}
