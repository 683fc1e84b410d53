package query

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// ComponentVersion is what can be told about one running component.
type ComponentVersion struct {
	Component string `json:"component"`
	// Version is the component's own version where antctl can read it (its
	// build for antctl, OVSDB's ovs_version for OVS); for the controller and
	// agents, the image tag when it is a version. The controller's and
	// agents' build versions are not served yet.
	Version string `json:"version,omitempty"`
	Pod     string `json:"pod,omitempty"`
	Node    string `json:"node,omitempty"`
	Image   string `json:"image,omitempty"`
	ImageID string `json:"imageID,omitempty"`
	Status  string `json:"status,omitempty"`
}

// Versions is what the cluster tells of Antrea's versions.
type Versions struct {
	// ControlplaneAPI says whether kube-apiserver serves
	// controlplane.antrea.io/v1beta2 (the controller's API).
	ControlplaneAPI string `json:"controlplaneAPI,omitempty"`
	// Components are the controller's and agents' pods.
	Components []ComponentVersion `json:"components,omitempty"`
	// Notes say what could not be read, and why.
	Notes []string `json:"notes,omitempty"`
}

// The labels of the manifest's pods (build/yamls/antrea.yml).
const (
	componentLabel = "component"
	agentComponent = "antrea-agent"
)

// releaseTag is an image tag that names a version.
var releaseTag = regexp.MustCompile(`^v?[0-9]+\.[0-9]+`)

// ClusterVersions reads whether the controller's API is served and the
// controller's and agents' pods: their images (a tag that is a version is
// the version: the components do not serve their build yet), nodes and
// status. The error is for a cluster that could not be read at all; what
// was read is still returned.
func ClusterVersions(ctx context.Context, c *Clients) (*Versions, error) {
	info := &Versions{}
	gv := cpv1beta2.SchemeGroupVersion.String()
	if _, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
		info.ControlplaneAPI = fmt.Sprintf("%s is not served: %v", gv, err)
	} else {
		info.ControlplaneAPI = gv + " is served"
	}
	var reached bool
	for _, comp := range []string{controllerName, agentComponent} {
		pods, err := c.Kube.CoreV1().Pods(AntreaNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{componentLabel: comp}.String(),
		})
		if apierrors.IsForbidden(err) {
			reached = true
			info.Notes = append(info.Notes, fmt.Sprintf("%s: cannot list pods in %s with these credentials (the agent's ServiceAccount cannot); run antctl version with a kubeconfig",
				comp, AntreaNamespace))
			continue
		}
		if err != nil {
			info.Notes = append(info.Notes, fmt.Sprintf("%s: %v", comp, err))
			continue
		}
		reached = true
		if len(pods.Items) == 0 {
			info.Notes = append(info.Notes, fmt.Sprintf("no %s pod in %s", comp, AntreaNamespace))
		}
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Spec.NodeName < pods.Items[j].Spec.NodeName })
		for i := range pods.Items {
			info.Components = append(info.Components, podVersion(comp, &pods.Items[i]))
		}
	}
	if !reached {
		return info, fmt.Errorf("could not read the cluster's Antrea pods (see the notes)")
	}
	return info, nil
}

// podVersion describes the component's container in a pod.
func podVersion(comp string, p *corev1.Pod) ComponentVersion {
	v := ComponentVersion{Component: comp, Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Status: podStatus(p)}
	for _, c := range p.Spec.Containers {
		if c.Name == comp {
			v.Image = c.Image
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == comp {
			v.ImageID = s.ImageID
		}
	}
	if i := strings.LastIndex(v.Image, ":"); i >= 0 && !strings.Contains(v.Image[i:], "/") {
		if tag := v.Image[i+1:]; releaseTag.MatchString(tag) {
			v.Version = tag
		}
	}
	return v
}

// podStatus is the phase and readiness kubectl get pods shows.
func podStatus(p *corev1.Pod) string {
	ready := "not ready"
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = "ready"
		}
	}
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	return string(p.Status.Phase) + ", " + ready
}
