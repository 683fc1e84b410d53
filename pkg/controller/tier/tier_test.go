package tier

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

func TestEnsureCreatesTheStaticTiersOnceAndRestoresAChangedOne(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "custom"}, Spec: crdv1beta1.TierSpec{Priority: 10}})
	k, err := NewKeeper(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"emergency": 50, "securityops": 100, "networkops": 150, "platform": 200, "application": 250, "baseline": 253, "custom": 10}
	check := func() {
		t.Helper()
		l, err := client.CrdV1beta1().Tiers().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int32{}
		for _, tier := range l.Items {
			got[tier.Name] = tier.Spec.Priority
		}
		if len(got) != len(want) {
			t.Fatalf("Tiers %v, want %v", got, want)
		}
		for name, p := range want {
			if got[name] != p {
				t.Errorf("Tier %s has priority %d, want %d", name, got[name], p)
			}
		}
	}
	check()

	client.ClearActions()
	if err := k.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a second Ensure wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}

	platform, _ := client.CrdV1beta1().Tiers().Get(ctx, "platform", metav1.GetOptions{})
	platform.Spec.Priority = 201
	if _, err := client.CrdV1beta1().Tiers().Update(ctx, platform, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CrdV1beta1().Tiers().Delete(ctx, "baseline", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	check()
}

func TestEnsureReportsAWebhookThatRefuses(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("create", "tiers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, context.DeadlineExceeded
	})
	k, err := NewKeeper(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Ensure(context.Background()); err == nil {
		t.Fatal("Ensure succeeded although every create failed")
	}
}
