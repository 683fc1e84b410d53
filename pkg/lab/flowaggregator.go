package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Flow Aggregator (`antrea-lab up --flow-visibility`): the lab applies
// build/yamls/flow-aggregator.yml as it is (the image name it holds is the
// one the lab builds, FlowAggregatorImage) and turns the agents'
// FlowExporter on (flowExporterOverlay).
const (
	// FlowAggregatorManifestName is the manifest, in build/yamls.
	FlowAggregatorManifestName = "flow-aggregator.yml"
	// FlowAggregatorNamespace and FlowAggregatorDeployment are where the
	// manifest puts it; its Service has the Deployment's name.
	FlowAggregatorNamespace  = "flow-aggregator"
	FlowAggregatorDeployment = "flow-aggregator"
)

// installFlowAggregator applies the manifest and waits until the
// Deployment is available.
func (s *supervisor) installFlowAggregator(ctx context.Context) error {
	src := filepath.Join(s.opts.manifestDir(), FlowAggregatorManifestName)
	manifest, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read the Flow Aggregator manifest (make manifests): %w", err)
	}
	return s.applyAddon(ctx, "Flow Aggregator", FlowAggregatorManifestName, manifest, func() (bool, string) {
		d, err := s.client.AppsV1().Deployments(FlowAggregatorNamespace).Get(ctx, FlowAggregatorDeployment, metav1.GetOptions{})
		switch {
		case err != nil:
			return false, err.Error()
		case d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas:
			return true, "flow-aggregator available"
		}
		return false, fmt.Sprintf("%d of %d flow-aggregator replicas available (kubectl -n %s describe pods -l app=flow-aggregator)",
			d.Status.AvailableReplicas, d.Status.Replicas, FlowAggregatorNamespace)
	})
}
