// Package nodesim is the lab's node simulator: it plays the kubelet's
// networking role for one simulated node. It registers the Node and keeps its
// heartbeat, watches the pods bound to the node, and for each pod creates a
// network namespace, calls the CNI through libcni the way containerd does,
// starts the pod's processes inside the namespace and reports the pod's IP
// and readiness in its status. On deletion it reverses every step and
// finishes the deletion as kubelet does.
//
// There are no container images in the lab, so a container maps to a process:
// a container with a command runs that command from the host's filesystem
// inside the pod's netns; any other container runs the test pod program
// (antrea-testpod serve) on the container's declared ports, or on TCP and UDP
// 80 and 81 when it declares none.
package nodesim

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Config describes one simulated node. The simulator is meant to run inside
// the node's network namespace: the CNI plugins it calls treat the caller's
// namespace as the host side, and ReferenceCNI routes are installed there.
//
// Start the simulator with setns(2) only (e.g. `nsenter --net=PATH`), not with
// `ip netns exec`: the latter puts the process in a private mount namespace,
// so the pod netns bind mounts it makes under /var/run/netns would be invisible
// to the rest of the machine.
type Config struct {
	// NodeName is the Node object's name.
	NodeName string
	// Kubeconfig is the path of the kubeconfig used to reach the API server.
	Kubeconfig string
	// NodeIP is the node's InternalIP (its underlay address).
	NodeIP net.IP

	// CNIConfDir holds the CNI network configuration; the first file in
	// lexical order (.conflist, .conf or .json) is used, as containerd does.
	CNIConfDir string
	// CNIBinDirs are searched for CNI plugin binaries.
	CNIBinDirs []string
	// CNICacheDir is libcni's result cache (containerd: /var/lib/cni).
	CNICacheDir string

	// PodNetNSPrefix starts the name of every pod netns under /var/run/netns,
	// e.g. "antrea-lab-pod-"; the rest of the name is a short pod UID.
	PodNetNSPrefix string
	// StateDir keeps one state file per pod (sandbox id, netns, pids) so a
	// restarted simulator adopts its running pods instead of recreating them.
	StateDir string
	// PodLogDir receives each container's output as <ns>_<pod>_<container>.log.
	PodLogDir string
	// TestPodBinary is the path of antrea-testpod, run for image-only containers.
	TestPodBinary string

	// ReferenceCNI makes the simulator write CNIConfDir/10-lab-bridge.conflist
	// (bridge + host-local on the node's podCIDR) once the podCIDR is known, and
	// keep a route to every other Node's podCIDR via that Node's InternalIP.
	ReferenceCNI bool

	// Workers is the number of pods synced in parallel (default 4).
	Workers int
	// LeaseDuration is the node Lease's duration; the Lease is renewed every
	// quarter of it (default 40s, as kubelet).
	LeaseDuration time.Duration
	// StatusInterval is how often the Ready condition's heartbeat is refreshed
	// (default 1m).
	StatusInterval time.Duration
}

// ReferenceCNIConfFile is the conflist the simulator writes in ReferenceCNI mode.
const ReferenceCNIConfFile = "10-lab-bridge.conflist"

// NetNSAnnotation records, on each pod, the name of its network namespace under
// /var/run/netns, so tools (antrea-lab exec, tests) can enter it.
const NetNSAnnotation = "lab.antrea.io/netns"

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 40 * time.Second
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = time.Minute
	}
}

// validate reports the first missing or malformed field.
func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("nodesim: NodeName is required")
	case c.NodeIP == nil:
		return fmt.Errorf("nodesim: node %s: NodeIP is required", c.NodeName)
	case c.CNIConfDir == "":
		return fmt.Errorf("nodesim: node %s: CNIConfDir is required", c.NodeName)
	case len(c.CNIBinDirs) == 0:
		return fmt.Errorf("nodesim: node %s: CNIBinDirs is required", c.NodeName)
	case c.CNICacheDir == "":
		return fmt.Errorf("nodesim: node %s: CNICacheDir is required", c.NodeName)
	case c.PodNetNSPrefix == "":
		return fmt.Errorf("nodesim: node %s: PodNetNSPrefix is required", c.NodeName)
	case c.StateDir == "":
		return fmt.Errorf("nodesim: node %s: StateDir is required", c.NodeName)
	case c.PodLogDir == "":
		return fmt.Errorf("nodesim: node %s: PodLogDir is required", c.NodeName)
	case c.TestPodBinary == "":
		return fmt.Errorf("nodesim: node %s: TestPodBinary is required", c.NodeName)
	}
	return nil
}
