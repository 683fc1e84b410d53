package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// ValidateNodeLatencyMonitor refuses what upstream's NodeLatencyMonitor
// schema refuses: a name other than "default" (it is a singleton) and a
// spec.pingIntervalSeconds below 1.
func (v *Validator) ValidateNodeLatencyMonitor(_ context.Context, m *crdv1alpha1.NodeLatencyMonitor) field.ErrorList {
	var errs field.ErrorList
	if m.Name != crdv1alpha1.NodeLatencyMonitorName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), m.Name,
			fmt.Sprintf("the NodeLatencyMonitor is a singleton named %q", crdv1alpha1.NodeLatencyMonitorName)))
	}
	if s := m.Spec.PingIntervalSeconds; s < crdv1alpha1.MinPingIntervalSeconds {
		errs = append(errs, field.Invalid(field.NewPath("spec", "pingIntervalSeconds"), s,
			fmt.Sprintf("must be at least %d", crdv1alpha1.MinPingIntervalSeconds)))
	}
	return errs
}
