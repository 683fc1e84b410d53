package cniserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	agenttypes "antrea.io/antrea/pkg/agent/types"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/cni"
)

// Error is a CNI error with its code (cnipb.ErrorCode follows the CNI spec's
// numbering); handlers return it to the shim as is.
type Error struct {
	Code    cnipb.ErrorCode
	Message string
	Details string
}

func (e *Error) Error() string {
	if e.Details == "" {
		return fmt.Sprintf("%s (CNI error %d)", e.Message, e.Code)
	}
	return fmt.Sprintf("%s: %s (CNI error %d)", e.Message, e.Details, e.Code)
}

func newError(code cnipb.ErrorCode, details error, format string, args ...any) *Error {
	e := &Error{Code: code, Message: fmt.Sprintf(format, args...)}
	if details != nil {
		e.Details = details.Error()
	}
	return e
}

// toProto turns any error into the error of a response: a *Error keeps its
// code, anything else is reported as UNKNOWN with its text.
func toProto(err error) *cnipb.Error {
	var e *Error
	if errors.As(err, &e) {
		return &cnipb.Error{Code: e.Code, Message: e.Message, Details: e.Details}
	}
	return &cnipb.Error{Code: cnipb.ErrorCode_UNKNOWN, Message: err.Error()}
}

// netConf is the network configuration of a request: what the runtime read
// from the conflist, plus the GC field of CNI 1.1.
type netConf struct {
	types.NetConf
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`
	// RuntimeConfig carries the capabilities' arguments (portMappings).
	RuntimeConfig runtimeConfig `json:"runtimeConfig,omitempty"`
}

// request is a validated CNI request.
type request struct {
	ContainerID  string
	Netns        string
	IfName       string
	PodNamespace string
	PodName      string
	Conf         netConf
	// PortMappings are the pod's hostPorts (runtimeConfig.portMappings),
	// validated; ADD and CHECK only.
	PortMappings []agenttypes.PortMapping
}

func (r *request) String() string {
	return fmt.Sprintf("pod %s/%s (container %s, %s)", r.PodNamespace, r.PodName, r.ContainerID, r.IfName)
}

// validation says what a verb requires of a request.
type validation struct {
	// needNetns: the netns path must exist (ADD, CHECK; DEL tolerates a netns
	// the runtime already removed).
	needNetns bool
	// needContainer: CNI_CONTAINERID and CNI_IFNAME must be set (not for STATUS, GC).
	needContainer bool
	// needPod: K8S_POD_NAMESPACE and K8S_POD_NAME must be in CNI_ARGS.
	needPod bool
}

// parseRequest decodes and validates a request; every error names the field
// at fault.
func parseRequest(req *cnipb.CniCmdRequest, v validation) (*request, error) {
	a := req.GetCniArgs()
	if a == nil {
		return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, nil, "request has no cni_args")
	}
	r := &request{ContainerID: a.GetContainerId(), Netns: a.GetNetns(), IfName: a.GetIfname()}
	if err := json.Unmarshal(a.GetNetworkConfiguration(), &r.Conf); err != nil {
		return nil, newError(cnipb.ErrorCode_DECODING_FAILURE, err, "network configuration is not valid JSON")
	}
	if r.Conf.CNIVersion == "" {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "network configuration: cniVersion is missing")
	}
	if !slices.Contains(cni.SupportedVersions, r.Conf.CNIVersion) {
		return nil, newError(cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION, nil,
			"network configuration: cniVersion %q is not supported (supported: %s)", r.Conf.CNIVersion, strings.Join(cni.SupportedVersions, ", "))
	}
	if r.Conf.Name == "" {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "network configuration: name is missing")
	}
	if v.needContainer {
		if r.ContainerID == "" {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, nil, "CNI_CONTAINERID is empty")
		}
		if err := validateIfName(r.IfName); err != nil {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, err, "CNI_IFNAME %q is not a valid interface name", r.IfName)
		}
	}
	if v.needNetns {
		if r.Netns == "" {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, nil, "CNI_NETNS is empty")
		}
		if _, err := os.Stat(r.Netns); err != nil {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, err, "CNI_NETNS %q does not exist", r.Netns)
		}
	}
	args, err := parseArgs(a.GetArgs())
	if err != nil {
		return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, err, "CNI_ARGS %q is malformed", a.GetArgs())
	}
	r.PodNamespace, r.PodName = args["K8S_POD_NAMESPACE"], args["K8S_POD_NAME"]
	if v.needPod {
		if r.PodNamespace == "" {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, nil, "CNI_ARGS: K8S_POD_NAMESPACE is missing")
		}
		if r.PodName == "" {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, nil, "CNI_ARGS: K8S_POD_NAME is missing")
		}
	}
	// What ADD records must be well formed: the container ID is written into
	// the IPAM store ("containerID\r\nifname") and OVS external_ids (libcni's
	// rule keeps it one plain token); the pod's names key the interface
	// store, the policy index and the host interface name. DEL does not
	// judge them: it cleans up whatever it is given.
	if v.needPod {
		if e := utils.ValidateContainerID(r.ContainerID); e != nil {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, e,
				"CNI_CONTAINERID %q is not valid (letters, digits, '_', '.', '-'; not starting with '_', '.', '-')", r.ContainerID)
		}
		if msgs := k8svalidation.IsDNS1123Label(r.PodNamespace); len(msgs) > 0 {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, errors.New(strings.Join(msgs, "; ")),
				"CNI_ARGS: K8S_POD_NAMESPACE %q is not a namespace name", r.PodNamespace)
		}
		if msgs := k8svalidation.IsDNS1123Subdomain(r.PodName); len(msgs) > 0 {
			return nil, newError(cnipb.ErrorCode_INVALID_ENVIRONMENT_VARIABLES, errors.New(strings.Join(msgs, "; ")),
				"CNI_ARGS: K8S_POD_NAME %q is not a pod name", r.PodName)
		}
		if r.PortMappings, err = parsePortMappings(r.Conf.RuntimeConfig.PortMappings); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// validateIfName applies libcni's rules for a network device name (those of
// the kernel's dev_valid_name, with any Unicode space refused too).
func validateIfName(name string) error {
	if e := utils.ValidateInterfaceName(name); e != nil {
		return errors.New(e.Msg)
	}
	return nil
}

// parseArgs splits CNI_ARGS ("K=V;K=V").
func parseArgs(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}
