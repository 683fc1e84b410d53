package app

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestTheAgentKnowsAntreaIsUninstalledWhenItsDaemonSetIsGone(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "antrea-agent", Namespace: "kube-system", UID: "ds-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "antrea-agent-x", Namespace: "kube-system",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "antrea-agent", UID: types.UID("ds-1")}}}}
	deleting := ds.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"foregroundDeletion"}
	replaced := ds.DeepCopy()
	replaced.UID = "ds-2"
	for _, tc := range []struct {
		name    string
		env     bool
		objects []runtime.Object
		deny    bool // the API answers 403 (the agent's ClusterRole is gone)
		want    bool
	}{
		{"the agent's role was deleted with the rest of the manifest", true, []runtime.Object{pod, ds}, true, true},
		{"the DaemonSet still exists: an upgrade or a restart", true, []runtime.Object{pod, ds}, false, false},
		{"the DaemonSet is gone", true, []runtime.Object{pod}, false, true},
		{"the DaemonSet is being deleted", true, []runtime.Object{pod, deleting}, false, true},
		{"a new DaemonSet of the same name replaced the pod's", true, []runtime.Object{pod, replaced}, false, true},
		{"the agent's own pod cannot be read", true, []runtime.Object{ds}, false, false},
		{"the agent runs outside a pod", false, []runtime.Object{pod}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env {
				t.Setenv("POD_NAMESPACE", "kube-system")
				t.Setenv("POD_NAME", "antrea-agent-x")
			} else {
				t.Setenv("POD_NAMESPACE", "")
				t.Setenv("POD_NAME", "")
			}
			c := fake.NewSimpleClientset(tc.objects...)
			if tc.deny {
				c.PrependReactor("get", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: action.GetResource().Resource}, "x", nil)
				})
			}
			if got := uninstalled(context.Background(), c); got != tc.want {
				t.Errorf("uninstalled = %v, want %v", got, tc.want)
			}
		})
	}
}
