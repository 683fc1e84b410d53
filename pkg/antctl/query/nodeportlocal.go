package query

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	npltypes "antrea.io/antrea/pkg/agent/nodeportlocal/types"
	"antrea.io/antrea/pkg/util/suggest"
)

// PodNodePortLocal is one NodePortLocal mapping of a Pod: its port reached
// at NodeIP:NodePort (the Pod's annotation nodeportlocal.antrea.io).
type PodNodePortLocal struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
	PodIP     string `json:"podIP"`
	npltypes.Mapping
}

// NodePortLocal returns the mappings of the Pod namespace/pod, or of every
// Pod of namespace ("" pod; every namespace when namespace is "" too),
// sorted by namespace, Pod, family, protocol and Pod port. A Pod whose
// annotation does not parse is an error naming it.
func NodePortLocal(ctx context.Context, c *Clients, namespace, pod string) ([]PodNodePortLocal, error) {
	pods := c.Kube.CoreV1().Pods(namespace)
	var out []PodNodePortLocal
	add := func(ns, name, node, ip string, annotations map[string]string) error {
		v, ok := annotations[npltypes.PodAnnotation]
		if !ok {
			return nil
		}
		ms, err := npltypes.ParseAnnotation(v)
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", ns, name, err)
		}
		for _, m := range ms {
			out = append(out, PodNodePortLocal{Namespace: ns, Pod: name, Node: node, PodIP: ip, Mapping: m})
		}
		return nil
	}
	if pod != "" {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			var names []string
			if l, lerr := pods.List(ctx, metav1.ListOptions{}); lerr == nil {
				for _, p := range l.Items {
					names = append(names, p.Name)
				}
			}
			return nil, fmt.Errorf("no Pod %q in namespace %s%s", pod, namespace, suggest.Hint(pod, names))
		}
		if err != nil {
			return nil, err
		}
		if err := add(p.Namespace, p.Name, p.Spec.NodeName, p.Status.PodIP, p.Annotations); err != nil {
			return nil, err
		}
	} else {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range l.Items {
			if err := add(p.Namespace, p.Name, p.Spec.NodeName, p.Status.PodIP, p.Annotations); err != nil {
				return nil, err
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Pod != b.Pod {
			return a.Pod < b.Pod
		}
		if a.Family() != b.Family() {
			return a.Family() < b.Family()
		}
		if a.Protocol != b.Protocol {
			return a.Protocol < b.Protocol
		}
		return a.PodPort < b.PodPort
	})
	return out, nil
}
