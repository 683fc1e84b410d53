package monitor

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// A check that fails once (an aggregated API answering 503 for a moment)
// leaves the condition True; one that keeps failing makes it False with the
// last error, after probeTries checks.
func TestAConditionIsFalseOnlyWhenEveryTryFails(t *testing.T) {
	now := metav1.Now()
	calls := 0
	flaky := func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("the server is currently unable to handle the request")
		}
		return nil
	}
	if c := condition(context.Background(), crdv1beta1.ControllerConnectionUp, now, flaky); c.Status != corev1.ConditionTrue || calls != 2 {
		t.Fatalf("one failed answer, then one: got %+v after %d calls, want True after 2", c, calls)
	}
	calls = 0
	down := func(context.Context) error { calls++; return errors.New("connection refused") }
	c := condition(context.Background(), crdv1beta1.ControllerConnectionUp, now, down)
	if c.Status != corev1.ConditionFalse || c.Reason != "ControllerConnectionDown" || c.Message != "connection refused" || calls != probeTries {
		t.Fatalf("always failing: got %+v after %d calls, want False, ControllerConnectionDown, the error, after %d", c, calls, probeTries)
	}
}
