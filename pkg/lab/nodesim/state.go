package nodesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// podState is what the simulator knows about one pod sandbox; it is persisted
// under StateDir/pods so a restarted simulator can adopt the sandbox, or tear
// it down with the same sandbox id and CNI configuration that created it.
type podState struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// SandboxID is the CNI container id (as containerd's pod sandbox id).
	SandboxID string `json:"sandboxID"`
	// NetNS is the netns name under /var/run/netns ("" for hostNetwork pods).
	NetNS string `json:"netns"`
	// ConfList is the CNI configuration the ADD used; DEL uses it too, so a
	// configuration that changes meanwhile (bridge → antrea) tears down right.
	ConfList json.RawMessage `json:"confList,omitempty"`
	// IPs are the pod's addresses from the CNI result; empty until ADD succeeded.
	IPs []string `json:"ips,omitempty"`
	// Created is when the sandbox got its network.
	Created    time.Time        `json:"created"`
	Containers []containerState `json:"containers,omitempty"`
}

// containerState is one container's process.
type containerState struct {
	Name string `json:"name"`
	// PID and StartTicks (start time in clock ticks since boot, from
	// /proc/PID/stat) identify the process; the pair guards against PID reuse.
	PID          int       `json:"pid"`
	StartTicks   uint64    `json:"startTicks"`
	StartedAt    time.Time `json:"startedAt"`
	RestartCount int32     `json:"restartCount"`
	// Ready is set once the process answers on its ports.
	Ready bool `json:"ready"`
	// LastExit describes the previous run, for status and crash backoff.
	LastExitCode *int      `json:"lastExitCode,omitempty"`
	LastExitAt   time.Time `json:"lastExitAt,omitempty"`
}

func (s *podState) key() string { return s.Namespace + "/" + s.Name }

// netnsPath is the pod's netns path, "" for a hostNetwork pod.
func (s *podState) netnsPath() string {
	if s.NetNS == "" {
		return ""
	}
	return netnsPath(s.NetNS)
}

func (s *podState) container(name string) *containerState {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

func netnsPath(name string) string { return filepath.Join("/var/run/netns", name) }

func stateDir(root string) string { return filepath.Join(root, "pods") }

func statePath(root, uid string) string { return filepath.Join(stateDir(root), uid+".json") }

// saveState writes the state atomically: a crash leaves the old or the new file.
func saveState(root string, s *podState) error {
	if err := os.MkdirAll(stateDir(root), 0o755); err != nil {
		return fmt.Errorf("state of pod %s: %w", s.key(), err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("state of pod %s: %w", s.key(), err)
	}
	p := statePath(root, s.UID)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("state of pod %s: %w", s.key(), err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("state of pod %s: %w", s.key(), err)
	}
	return nil
}

func removeState(root string, s *podState) error {
	if err := os.Remove(statePath(root, s.UID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state of pod %s: %w", s.key(), err)
	}
	return nil
}

// loadStates reads every pod state file under root.
func loadStates(root string) ([]*podState, error) {
	entries, err := os.ReadDir(stateDir(root))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod states in %s: %w", root, err)
	}
	var states []*podState
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(stateDir(root), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("pod state %s: %w", p, err)
		}
		var s podState
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("pod state %s: %w", p, err)
		}
		states = append(states, &s)
	}
	return states, nil
}

// deepCopy returns an independent copy (nil for nil).
func (s *podState) deepCopy() *podState {
	if s == nil {
		return nil
	}
	c := *s
	c.ConfList = append(json.RawMessage(nil), s.ConfList...)
	c.IPs = append([]string(nil), s.IPs...)
	c.Containers = append([]containerState(nil), s.Containers...)
	for i := range c.Containers {
		if e := s.Containers[i].LastExitCode; e != nil {
			v := *e
			c.Containers[i].LastExitCode = &v
		}
	}
	return &c
}

// exitRecord is how and when a process this simulator started ended.
type exitRecord struct {
	code int
	at   time.Time
}
