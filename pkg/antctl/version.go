package antctl

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/version"
)

// componentVersion is what antctl can tell about one running component.
type componentVersion struct {
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

// versionInfo is antctl version's answer.
type versionInfo struct {
	Client componentVersion `json:"client"`
	// ControlplaneAPI says whether kube-apiserver serves
	// controlplane.antrea.io/v1beta2 (the controller's API).
	ControlplaneAPI string             `json:"controlplaneAPI,omitempty"`
	Components      []componentVersion `json:"components,omitempty"`
	// Notes say what antctl could not read, and why.
	Notes []string `json:"notes,omitempty"`
}

// releaseTag is an image tag that names a version.
var releaseTag = regexp.MustCompile(`^v?[0-9]+\.[0-9]+`)

func newVersionCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of antctl, the controller and every agent",
		Long: `Show the version of antctl, whether the controller's API is served, and for
antrea-controller and each antrea-agent their pod, node, image (with its digest)
and status. The controller and agents do not serve their build version yet:
their image tag and digest identify what runs. In local mode antctl also reads
this node's OVS version from OVSDB.`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			o.preRun(cmd)
			return checkOutput(output)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := o.version(cmd.Context())
			if output != outputTable {
				if werr := writeObject(o.env.Out, output, info); werr != nil {
					return werr
				}
				return err
			}
			t := &table{header: []string{"COMPONENT", "VERSION", "POD", "NODE", "IMAGE", "STATUS"}}
			for _, c := range append([]componentVersion{info.Client}, info.Components...) {
				img := c.Image
				if c.ImageID != "" {
					img += "@" + shortDigest(c.ImageID)
				}
				t.add(c.Component, c.Version, c.Pod, c.Node, img, c.Status)
			}
			if werr := t.write(o.env.Out); werr != nil {
				return werr
			}
			if info.ControlplaneAPI != "" {
				fmt.Fprintf(o.env.Out, "controlplane API: %s\n", info.ControlplaneAPI)
			}
			for _, n := range info.Notes {
				fmt.Fprintf(o.env.Err, "note: %s\n", n)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "Output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// version gathers what can be read; the error is for a cluster antctl
// could not reach at all (what it read is still returned).
func (o *options) version(ctx context.Context) (*versionInfo, error) {
	sha := version.GitSHA
	if len(sha) > 12 {
		sha = sha[:12]
	}
	info := &versionInfo{Client: componentVersion{Component: "antctl",
		Version: fmt.Sprintf("%s (git %s, tree %s)", version.Version, sha, version.GitTreeState)}}
	if c, err := o.agentConfig(); err == nil {
		ovs := componentVersion{Component: "ovs (this node)", Node: o.env.NodeName}
		if v, err := (&localNode{conf: c}).ovsVersion(ctx); err == nil {
			ovs.Version = v
		} else {
			info.Notes = append(info.Notes, fmt.Sprintf("OVS version: %v", err))
		}
		info.Components = append(info.Components, ovs)
	}
	c, err := o.getClients()
	if err != nil {
		return info, err
	}
	gv := cpv1beta2.SchemeGroupVersion.String()
	if _, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
		info.ControlplaneAPI = fmt.Sprintf("%s is not served: %v", gv, err)
	} else {
		info.ControlplaneAPI = gv + " is served"
	}
	var reached bool
	for _, comp := range []string{controllerName, agentDaemonSet} {
		pods, err := c.Kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{componentLabel: comp}.String(),
		})
		if apierrors.IsForbidden(err) {
			reached = true
			info.Notes = append(info.Notes, fmt.Sprintf("%s: cannot list pods in %s with these credentials (the agent's ServiceAccount cannot); run antctl version with a kubeconfig",
				comp, antreaNamespace))
			continue
		}
		if err != nil {
			info.Notes = append(info.Notes, fmt.Sprintf("%s: %v", comp, err))
			continue
		}
		reached = true
		if len(pods.Items) == 0 {
			info.Notes = append(info.Notes, fmt.Sprintf("no %s pod in %s", comp, antreaNamespace))
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
func podVersion(comp string, p *corev1.Pod) componentVersion {
	v := componentVersion{Component: comp, Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Status: podStatus(p)}
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

// shortDigest cuts an image ID to its digest's first 12 hex digits.
func shortDigest(id string) string {
	if i := strings.LastIndex(id, "sha256:"); i >= 0 {
		d := id[i+len("sha256:"):]
		if len(d) > 12 {
			d = d[:12]
		}
		return "sha256:" + d
	}
	return id
}
