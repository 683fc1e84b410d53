package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Phases of a lab as recorded in its state file.
const (
	PhaseStarting = "Starting"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
	PhaseStopping = "Stopping"
)

// State is what the supervisor made, written to state.json before and after
// every step so that `down` can remove all of it even when the supervisor was
// killed in the middle of something.
type State struct {
	// Supervisor is the supervisor process itself.
	Supervisor Process `json:"supervisor"`
	// Phase is Starting, Ready, Failed or Stopping.
	Phase string `json:"phase"`
	// Message explains a Failed phase.
	Message string `json:"message,omitempty"`
	// Options are the options the lab was started with.
	Options Options `json:"options"`
	// NetNS lists every network namespace the lab created, in creation order.
	NetNS []string `json:"netns"`
	// Veths lists every veth pair the lab created.
	Veths []Veth `json:"veths"`
	// Processes lists every daemon the supervisor started.
	Processes []Process `json:"processes"`
	// Files lists every file and directory the lab created outside of Dir.
	// Dir itself is always removed by `down`.
	Files []string `json:"files"`
	// Cgroups lists the cgroups made for real nodes (one per hierarchy and
	// node); `down` kills what is left in them and removes them.
	Cgroups []string `json:"cgroups,omitempty"`
	// MountPoints lists directories the lab created on the host as targets
	// of a node's bind mounts, parents first; `down` removes them if empty.
	MountPoints []string `json:"mountPoints,omitempty"`
	// Nodes describes the simulated nodes.
	Nodes []NodeInfo `json:"nodes"`
	// Kubeconfig is the host kubeconfig (server https://127.0.0.1:6443).
	Kubeconfig string `json:"kubeconfig"`
	// StartedAt is when `up` began; ReadyAt when every node was Ready.
	StartedAt time.Time `json:"startedAt"`
	ReadyAt   time.Time `json:"readyAt,omitzero"`
	// Antrea records the installation from the manifest (real nodes).
	Antrea AntreaInstall `json:"antrea,omitzero"`
}

// AntreaInstall is when the lab applied Antrea's manifest and when its pods
// became ready.
type AntreaInstall struct {
	AppliedAt         time.Time `json:"appliedAt,omitzero"`
	AgentsReadyAt     time.Time `json:"agentsReadyAt,omitzero"`
	ControllerReadyAt time.Time `json:"controllerReadyAt,omitzero"`
}

// Veth is one veth pair: End lives in NetNS, Peer in PeerNetNS.
type Veth struct {
	Name      string `json:"name"`
	NetNS     string `json:"netns"`
	Peer      string `json:"peer"`
	PeerNetNS string `json:"peerNetns"`
}

// Process is a process the lab started. StartTime (clock ticks since boot, as
// in /proc/PID/stat) tells a recorded PID from a later process that reused it.
type Process struct {
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	NetNS     string `json:"netns,omitempty"`
	Log       string `json:"log,omitempty"`
}

// NodeInfo is one simulated node.
type NodeInfo struct {
	Name  string `json:"name"`
	NetNS string `json:"netns"`
	IP    string `json:"ip"`
	// IPv6 is the node's IPv6 underlay address in a dual-stack lab
	// (underlay6.go), empty otherwise.
	IPv6 string `json:"ipv6,omitempty"`
	// IPv6Only: the node is a Node of an IPv6-only lab, whose one
	// InternalIP is IPv6 (IP stays on its underlay link for the lab's
	// plumbing: the image registry).
	IPv6Only bool `json:"ipv6Only,omitempty"`
	// Subnet is the node's underlay subnet, 1-based (subnets.go); 0 in a
	// state file written before --subnets: 1.
	Subnet int `json:"subnet,omitempty"`
}

// stateStore serializes updates of a State and writes the file atomically.
type stateStore struct {
	path string
	mu   sync.Mutex
	st   State
}

func (s *stateStore) update(fn func(st *State)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
	return writeState(s.path, &s.st)
}

func (s *stateStore) snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _ := json.Marshal(s.st)
	var c State
	_ = json.Unmarshal(data, &c)
	return c
}

func writeState(path string, st *State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create lab dir: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write lab state %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lab state %s: %w", path, err)
	}
	return nil
}

// LoadState reads the state file; it returns (nil, nil) when there is none.
func LoadState(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state %s: %w", path, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode lab state %s: %w", path, err)
	}
	return &st, nil
}
