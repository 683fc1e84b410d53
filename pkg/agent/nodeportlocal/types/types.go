// Package types is NodePortLocal's API: upstream's annotations and the
// JSON of a Pod's mappings, for the agent (pkg/agent/nodeportlocal) and for
// those who read them (antctl).
package types

import (
	"encoding/json"
	"fmt"
)

// The annotations, upstream's (pkg/agent/nodeportlocal/types of
// antrea-io/antrea).
const (
	// EnabledAnnotation on a Service, "true", asks for NodePortLocal
	// mappings of the Service's backend Pods.
	EnabledAnnotation = "nodeportlocal.antrea.io/enabled"
	// PodAnnotation on a Pod holds its mappings, a JSON list of Mapping.
	PodAnnotation = "nodeportlocal.antrea.io"
)

// IP families of Mapping.IPFamily, upstream's words.
const (
	IPFamilyIPv4 = "IPv4"
	IPFamilyIPv6 = "IPv6"
)

// Mapping is one element of the Pod annotation, field for field upstream's
// NPLAnnotation: the Pod's port PodPort (Protocol) is reached at
// NodeIP:NodePort.
type Mapping struct {
	PodPort  int    `json:"podPort"`
	NodeIP   string `json:"nodeIP"`
	NodePort int    `json:"nodePort"`
	// Protocol is "tcp" or "udp".
	Protocol string `json:"protocol"`
	// Protocols is upstream's deprecated form of Protocol (a list holding
	// Protocol), still written for consumers that read it.
	Protocols []string `json:"protocols"`
	// IPFamily is IPv4 or IPv6 (upstream's dual-stack field); a mapping
	// read without it is IPv4, as upstream reads it.
	IPFamily string `json:"ipFamily,omitempty"`
}

// Family is m's family, IPv4 when unset.
func (m Mapping) Family() string {
	if m.IPFamily == IPFamilyIPv6 {
		return IPFamilyIPv6
	}
	return IPFamilyIPv4
}

// ParseAnnotation reads a Pod's annotation value.
func ParseAnnotation(s string) ([]Mapping, error) {
	var ms []Mapping
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PodAnnotation, err)
	}
	return ms, nil
}
