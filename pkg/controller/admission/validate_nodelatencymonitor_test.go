package admission

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

func TestUpstreamNodeLatencyMonitorExampleIsAccepted(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../docs/node-latency-monitor.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, _, _ := strings.Cut(strings.SplitN(string(doc), "```yaml\n", 2)[1], "```")
	var m crdv1alpha1.NodeLatencyMonitor
	if err := yaml.UnmarshalStrict([]byte(block), &m); err != nil {
		t.Fatalf("the example does not decode strictly: %v", err)
	}
	if errs := NewValidator(newFakeLookup(), controllerUser).ValidateNodeLatencyMonitor(context.Background(), &m); len(errs) != 0 {
		t.Errorf("upstream's example refused: %v", errs)
	}
}

func TestInvalidNodeLatencyMonitorsAreRefusedNamingTheField(t *testing.T) {
	v := NewValidator(newFakeLookup(), controllerUser)
	for _, tc := range []struct {
		name     string
		objName  string
		interval int32
		field    string
	}{
		{"an interval below the minimum", "default", 0, "spec.pingIntervalSeconds"},
		{"a negative interval", "default", -5, "spec.pingIntervalSeconds"},
		{"another name than default", "mine", 10, "metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &crdv1alpha1.NodeLatencyMonitor{ObjectMeta: metav1.ObjectMeta{Name: tc.objName},
				Spec: crdv1alpha1.NodeLatencyMonitorSpec{PingIntervalSeconds: tc.interval}}
			errs := v.ValidateNodeLatencyMonitor(context.Background(), m)
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors = %v, want one naming %s", errs, tc.field)
			}
		})
	}
	ok := &crdv1alpha1.NodeLatencyMonitor{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: crdv1alpha1.NodeLatencyMonitorSpec{PingIntervalSeconds: 1}}
	if errs := v.ValidateNodeLatencyMonitor(context.Background(), ok); len(errs) != 0 {
		t.Errorf("the minimum interval refused: %v", errs)
	}
}
