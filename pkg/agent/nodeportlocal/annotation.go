package nodeportlocal

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
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

// family is m's family, IPv4 when unset.
func (m Mapping) family() string {
	if m.IPFamily == IPFamilyIPv6 {
		return IPFamilyIPv6
	}
	return IPFamilyIPv4
}

// compareMappings orders mappings by family, protocol, pod port, node port:
// the annotation is written in that order, so equal sets compare equal.
func compareMappings(a, b Mapping) int {
	return cmp.Or(cmp.Compare(a.family(), b.family()), cmp.Compare(a.Protocol, b.Protocol),
		cmp.Compare(a.PodPort, b.PodPort), cmp.Compare(a.NodePort, b.NodePort), cmp.Compare(a.NodeIP, b.NodeIP))
}

// ParseAnnotation reads a Pod's annotation value.
func ParseAnnotation(s string) ([]Mapping, error) {
	var ms []Mapping
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PodAnnotation, err)
	}
	return ms, nil
}

// sameMappings says whether the Pod's annotation (have) says what want
// says: the same mappings in any order, each with its protocols list.
func sameMappings(have, want []Mapping) bool {
	if len(have) != len(want) {
		return false
	}
	h := slices.Clone(have)
	for i := range h {
		h[i].IPFamily = h[i].family()
	}
	slices.SortFunc(h, compareMappings)
	for i := range h {
		if compareMappings(h[i], want[i]) != 0 || !slices.Equal(h[i].Protocols, want[i].Protocols) {
			return false
		}
	}
	return true
}

// patchAnnotation sets the Pod's annotation to ms (sorted), or removes it
// when ms is empty, with a JSON merge patch (no conflict with other
// writers of the Pod).
func patchAnnotation(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ms []Mapping) error {
	var value any // nil removes the annotation
	if len(ms) > 0 {
		b, err := json.Marshal(ms)
		if err != nil {
			return err
		}
		value = string(b)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{PodAnnotation: value}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, k8stypes.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
