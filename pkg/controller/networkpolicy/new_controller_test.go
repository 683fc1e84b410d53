package networkpolicy

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/storage"
)

// An informer that has stopped takes no handler: NewController says so
// instead of returning a controller that would never see a Pod.
func TestNewControllerFailsWhenAnInformerRefusesItsHandlers(t *testing.T) {
	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { pods.Run(stop); close(done) }()
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the Pod informer did not stop")
	}
	c, err := NewController(client, factory, storage.NewAddressGroupStore(), storage.NewAppliedToGroupStore(), storage.NewNetworkPolicyStore())
	if err == nil || c != nil || !strings.HasPrefix(err.Error(), "watching Pods: ") {
		t.Fatalf("NewController on a stopped Pod informer: %v, %v; want the error naming Pods", c, err)
	}
}

// The controller's own status writes come back as updates; only a changed
// spec, generation or object is news to it.
func TestOnSpecChangeIgnoresStatusWrites(t *testing.T) {
	base := &crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg", UID: "u1", Generation: 1},
		Spec: crdv1beta1.GroupSpec{IPBlocks: []crdv1beta1.IPBlock{{CIDR: "10.0.0.0/8"}}}}
	status := base.DeepCopy()
	status.Status.Conditions = []crdv1beta1.GroupCondition{{Type: crdv1beta1.GroupMembersComputed, Status: v1.ConditionTrue}}
	spec := base.DeepCopy()
	spec.Generation, spec.Spec.IPBlocks[0].CIDR = 2, "10.1.0.0/16"
	replaced := base.DeepCopy()
	replaced.UID = "u2"
	for _, tc := range []struct {
		name string
		cur  *crdv1beta1.ClusterGroup
		want bool
	}{
		{"a status write", status, false},
		{"a new spec", spec, true},
		{"the object deleted and created again", replaced, true},
	} {
		fired := false
		onSpecChange(func(any) { fired = true }, specOf[*crdv1beta1.ClusterGroup])(base, tc.cur)
		if fired != tc.want {
			t.Errorf("%s: handled %v, want %v", tc.name, fired, tc.want)
		}
	}
}
