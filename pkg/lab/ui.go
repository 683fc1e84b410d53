package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The web UI (`antrea-lab up --ui`): the lab applies build/yamls/antrea-ui.yml
// (the chart's ui templates with ui.enable=true, rendered by make manifests)
// after Antrea, with the image the lab builds (UIImage), and waits until the
// Deployment is available. `antctl ui` then opens it through a port-forward.
const (
	// UIManifestName is the manifest, in build/yamls.
	UIManifestName = "antrea-ui.yml"
	// UIDeployment is the Deployment (and Service) it creates in Antrea's
	// namespace.
	UIDeployment = "antrea-ui"
)

// installUI applies the UI's manifest and waits until it is available.
func (s *supervisor) installUI(ctx context.Context) error {
	src := filepath.Join(s.opts.manifestDir(), UIManifestName)
	manifest, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read the web UI's manifest (make manifests): %w", err)
	}
	return s.applyAddon(ctx, "web UI", UIManifestName, manifest, func() (bool, string) {
		d, err := s.client.AppsV1().Deployments(AntreaNamespace).Get(ctx, UIDeployment, metav1.GetOptions{})
		switch {
		case err != nil:
			return false, err.Error()
		case d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas:
			return true, "antrea-ui available (antctl ui)"
		}
		return false, fmt.Sprintf("%d of %d antrea-ui replicas available (kubectl -n %s describe pods -l component=antrea-ui)",
			d.Status.AvailableReplicas, d.Status.Replicas, AntreaNamespace)
	})
}
