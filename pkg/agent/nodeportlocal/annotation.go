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

	npltypes "antrea.io/antrea/pkg/agent/nodeportlocal/types"
)

// Upstream's annotations and the JSON of a Pod's mappings (package types).
const (
	EnabledAnnotation = npltypes.EnabledAnnotation
	PodAnnotation     = npltypes.PodAnnotation
	IPFamilyIPv4      = npltypes.IPFamilyIPv4
	IPFamilyIPv6      = npltypes.IPFamilyIPv6
)

// Mapping is one element of the Pod annotation.
type Mapping = npltypes.Mapping

// ParseAnnotation reads a Pod's annotation value.
var ParseAnnotation = npltypes.ParseAnnotation

// compareMappings orders mappings by family, protocol, pod port, node port:
// the annotation is written in that order, so equal sets compare equal.
func compareMappings(a, b Mapping) int {
	return cmp.Or(cmp.Compare(a.Family(), b.Family()), cmp.Compare(a.Protocol, b.Protocol),
		cmp.Compare(a.PodPort, b.PodPort), cmp.Compare(a.NodePort, b.NodePort), cmp.Compare(a.NodeIP, b.NodeIP))
}

// sameMappings says whether the Pod's annotation (have) says what want
// says: the same mappings in any order, each with its protocols list.
func sameMappings(have, want []Mapping) bool {
	if len(have) != len(want) {
		return false
	}
	h := slices.Clone(have)
	for i := range h {
		h[i].IPFamily = h[i].Family()
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
