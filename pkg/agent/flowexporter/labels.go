package flowexporter

import (
	"encoding/json"

	corev1listers "k8s.io/client-go/listers/core/v1"
)

// LabelLookup gives a local Pod's labels (never nil for a Pod it knows);
// ok is false for a Pod it does not know.
type LabelLookup interface {
	PodLabels(namespace, name string) (labels map[string]string, ok bool)
}

// PodListerLabels is LabelLookup on a Pod lister (the agent's informer of
// its Node's Pods).
type PodListerLabels struct{ Lister corev1listers.PodLister }

// PodLabels implements LabelLookup.
func (l PodListerLabels) PodLabels(namespace, name string) (map[string]string, bool) {
	p, err := l.Lister.Pods(namespace).Get(name)
	if err != nil {
		return nil, false
	}
	if p.Labels == nil {
		return map[string]string{}, true
	}
	return p.Labels, true
}

// labelsJSON encodes labels as a JSON object, as upstream's sourcePodLabels
// and destinationPodLabels carry them: keys sorted (encoding/json's order for
// maps), "{}" when there are none, "" for nil (the Pod is not known).
func labelsJSON(labels map[string]string) string {
	if labels == nil {
		return ""
	}
	if len(labels) == 0 {
		return "{}"
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return "{}"
	}
	return string(b)
}
