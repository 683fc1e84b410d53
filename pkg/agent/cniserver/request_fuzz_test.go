package cniserver

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/utils"
	"google.golang.org/protobuf/proto"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"antrea.io/antrea/pkg/agent/interfacestore"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/cni"
)

// Fuzz targets of the CNI request path on the agent side (issue 17 item 8).
// Run one with:
//
//	nice -n 10 go test -run '^$' -fuzz FuzzParseRequest -fuzztime 60s ./pkg/agent/cniserver
//
// Crashers land in testdata/fuzz/<target> and run in every `go test`.

// verbValidations are what ADD, CHECK, DEL and STATUS/GC ask of a request.
var verbValidations = []validation{
	{needNetns: true, needContainer: true, needPod: true}, // ADD, CHECK
	{needContainer: true}, // DEL
	{},                    // STATUS, GC
}

// fieldNames are the names a refusal must mention: the network
// configuration's keys, the CNI_* variables and the gRPC field.
var fieldNames = []string{
	"network configuration", "cniVersion", "name", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS", "CNI_ARGS", "cni_args",
}

// refusalCodes are the CNI spec's codes a malformed request can get (spec
// "Error codes": 1 incompatible version, 4 invalid environment variables,
// 6 decoding failure, 7 invalid network configuration).
var refusalCodes = []cnipb.ErrorCode{
	cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION,
	cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES,
	cnipb.ErrorCode_DECODING_FAILURE,
	cnipb.ErrorCode_INVALID_NETWORK_CONFIG,
}

const validConf = `{"cniVersion":"1.0.0","name":"antrea","type":"antrea"}`

func addRequestSeeds(f *testing.F) {
	kubelet := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=7f0e"
	for _, s := range []struct {
		conf, id, ifname, args string
		netns                  bool
		verb                   uint8
	}{
		{validConf, "c1", "eth0", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", true, 0},
		{`{"cniVersion":"1.1.0","name":"antrea","type":"antrea","agentSocket":"/run/a.sock","dns":{"nameservers":["10.96.0.10"]}}`, "0123abcdef", "eth0", kubelet, true, 0},
		{`{"cniVersion":"1.0.0","name":"antrea","type":"antrea","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.9.0.5/24"}]}}`, "c1", "eth0", kubelet, true, 0},
		{`{"cniVersion":"0.3.1","name":"antrea","type":"antrea","prevResult":{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.9.0.5/24"}]}}`, "c1", "net1", kubelet, true, 0},
		{`{"cniVersion":"1.1.0","name":"antrea","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`, "", "", "", false, 2},
		{validConf, "c1", "eth0", "", false, 1},
		{`{"cniVersion":"9.9.9","name":"antrea"}`, "c1", "eth0", kubelet, true, 0},
		{`{"name":"antrea"}`, "c1", "eth0", kubelet, true, 0},
		{`{"cniVersion":"1.0.0"}`, "c1", "eth0", kubelet, true, 0},
		{`{"cniVersion":1}`, "c1", "eth0", kubelet, true, 0},
		{`not json`, "c1", "eth0", kubelet, true, 0},
		{validConf, "", "eth0", kubelet, true, 0},
		{validConf, "c1\r\neth9", "eth0", kubelet, true, 0},
		{validConf, "c1", "eth0\v", kubelet, true, 0},
		{validConf, "c1", "a-name-longer-than-15", kubelet, true, 0},
		{validConf, "c1", "eth0", "K8S_POD_NAMESPACE;K8S_POD_NAME=p", true, 0},
		{validConf, "c1", "eth0", "K8S_POD_NAMESPACE=ns", true, 0},
		{validConf, "c1", "eth0", "K8S_POD_NAMESPACE=NS/x;K8S_POD_NAME=p", true, 0},
		{validConf, "c1", "eth0", "=x", false, 1},
	} {
		f.Add([]byte(s.conf), s.id, s.ifname, s.args, s.netns, s.verb)
	}
}

// FuzzParseRequest feeds parseRequest what the agent receives over its gRPC
// API (the request goes through the protobuf wire form first, as from the
// shim). A request is either accepted, and then holds everything its verb
// needs in valid form, or refused with a CNI spec code and a message naming
// the field at fault.
func FuzzParseRequest(f *testing.F) {
	addRequestSeeds(f)
	netnsPath := filepath.Join(f.TempDir(), "netns")
	if err := os.WriteFile(netnsPath, nil, 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, conf []byte, containerID, ifName, args string, netnsExists bool, verb uint8) {
		netns := filepath.Join(filepath.Dir(netnsPath), "gone")
		if netnsExists {
			netns = netnsPath
		}
		sent := &cnipb.CniCmdRequest{CniArgs: &cnipb.CniCmdArgs{
			ContainerId: containerID, Netns: netns, Ifname: ifName, Args: args, NetworkConfiguration: conf,
		}}
		wire, err := proto.Marshal(sent)
		if err != nil {
			// proto3 strings are UTF-8: the shim refuses such a request
			// before sending it (pkg/cni FuzzShimRequest checks that).
			t.Skip()
		}
		var req cnipb.CniCmdRequest
		if err := proto.Unmarshal(wire, &req); err != nil {
			t.Fatalf("the request does not survive the wire: %v", err)
		}
		v := verbValidations[int(verb)%len(verbValidations)]
		r, err := parseRequest(&req, v)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("refusal %v is not a CNI error", err)
			}
			if !slices.Contains(refusalCodes, e.Code) {
				t.Fatalf("refusal %v has code %d, not one of the spec's for a malformed request", err, e.Code)
			}
			if !slices.ContainsFunc(fieldNames, func(n string) bool { return strings.Contains(e.Message, n) }) {
				t.Fatalf("refusal %q names no field", e.Message)
			}
			return
		}
		if !slices.Contains(cni.SupportedVersions, r.Conf.CNIVersion) || r.Conf.Name == "" {
			t.Fatalf("accepted a network configuration with cniVersion %q, name %q", r.Conf.CNIVersion, r.Conf.Name)
		}
		if r.ContainerID != containerID || r.IfName != ifName || r.Netns != netns {
			t.Fatalf("accepted request %s does not carry the runtime's arguments", r)
		}
		if v.needContainer {
			if r.ContainerID == "" || utils.ValidateInterfaceName(r.IfName) != nil {
				t.Fatalf("accepted container %q interface %q", r.ContainerID, r.IfName)
			}
		}
		if v.needNetns && !netnsExists {
			t.Fatalf("accepted a netns that does not exist")
		}
		if v.needPod {
			if utils.ValidateContainerID(r.ContainerID) != nil {
				t.Fatalf("accepted container ID %q", r.ContainerID)
			}
			if len(k8svalidation.IsDNS1123Label(r.PodNamespace)) > 0 || len(k8svalidation.IsDNS1123Subdomain(r.PodName)) > 0 {
				t.Fatalf("accepted pod %q/%q", r.PodNamespace, r.PodName)
			}
			// An accepted interface name makes a host-side name too.
			if err := validateIfName(hostInterfaceName(r.PodNamespace, r.PodName, r.ContainerID)); err != nil {
				t.Fatalf("host interface name of %s: %v", r, err)
			}
		}
		parsed, _ := parseArgs(args)
		if r.PodNamespace != parsed["K8S_POD_NAMESPACE"] || r.PodName != parsed["K8S_POD_NAME"] {
			t.Fatalf("pod %s/%s, CNI_ARGS say %v", r.PodNamespace, r.PodName, parsed)
		}
		// CHECK reads prevResult: whatever it holds gives problems, not a panic.
		cfg := interfacestore.NewContainerInterface("p-1", r.ContainerID, r.PodName, r.PodNamespace, r.IfName, nil, []net.IP{net.ParseIP("10.9.0.5")}, 0)
		_ = prevResultProblems(&r.Conf.NetConf, cfg)
	})
}

// FuzzParseArgs checks the CNI_ARGS splitter: accepted input gives non-empty
// keys without '=' or ';', values without ';', the last of duplicate keys
// wins, and printing the map back as K=V;K=V parses to the same map.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"", ";", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p",
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=7f0e",
		"A=;B=c=d;;", "=x", "novalue", "A=1;A=2", "K8S_POD_NAME=p;K8S_POD_NAME", "\x00=\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseArgs(s)
		if err != nil {
			if !strings.Contains(err.Error(), "KEY=VALUE") {
				t.Fatalf("error %v does not say what is expected", err)
			}
			return
		}
		want := map[string]string{}
		for _, kv := range strings.Split(s, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				want[k] = v
			}
		}
		keys := make([]string, 0, len(m))
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, "=;") || strings.Contains(v, ";") {
				t.Fatalf("pair %q=%q from %q", k, v, s)
			}
			if want[k] != v {
				t.Fatalf("%s=%q, the last %s in %q is %q", k, v, k, s, want[k])
			}
			keys = append(keys, k)
		}
		if len(m) != len(want) {
			t.Fatalf("%d pairs from %q, want %d", len(m), s, len(want))
		}
		sort.Strings(keys)
		var b strings.Builder
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(';')
			}
			b.WriteString(k + "=" + m[k])
		}
		again, err := parseArgs(b.String())
		if err != nil || len(again) != len(m) {
			t.Fatalf("%q printed back as %q parses to %v, %v", s, b.String(), again, err)
		}
		for k, v := range m {
			if again[k] != v {
				t.Fatalf("%q printed back as %q: %s=%q, want %q", s, b.String(), k, again[k], v)
			}
		}
	})
}
