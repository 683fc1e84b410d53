package externalippool

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

// TestControllerAllocatesRestoresAndWritesUsage drives the controller over a
// fake clientset: restored allocations come first, new ones skip them, an
// exhausted pool gets an Event, the usage reaches the pool's status, and a
// pool created again under its name takes back what the Restorer reports.
func TestControllerAllocatesRestoresAndWritesUsage(t *testing.T) {
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1", Generation: 1},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.0.0.0/30"}, {Start: "fd00::1", End: "fd00::1"}}}}
	client := fake.NewSimpleClientset(pool)
	factory := crdinformers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(10)
	c, err := NewController(client, factory.Crd().V1beta1().ExternalIPPools(), rec)
	if err != nil {
		t.Fatal(err)
	}
	held := []Allocation{{Pool: "p", IP: netip.MustParseAddr("10.0.0.2"), Owner: "Egress/restored"}}
	c.AddRestorer(func(name string) []Allocation {
		if name == "p" {
			return held
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go c.Run(ctx)

	if failed := c.RestoreAllocations([]Allocation{held[0], {Pool: "gone", IP: netip.MustParseAddr("10.9.9.9"), Owner: "Egress/x"}}); len(failed) != 1 || failed[0].Pool != "gone" {
		t.Errorf("restore failed %v, want only the allocation of a pool that does not exist", failed)
	}
	var got []string
	for _, owner := range []string{"Egress/a", "Egress/b"} {
		ip, err := c.AllocateIP("p", owner)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip.String())
	}
	if strings.Join(got, ",") != "10.0.0.1,fd00::1" {
		t.Errorf("allocated %v, want 10.0.0.1 and fd00::1 (10.0.0.2 is restored)", got)
	}
	if _, err := c.AllocateIP("p", "Egress/c"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a fourth IP: %v, want ErrExhausted", err)
	}
	if ev := <-rec.Events; !strings.Contains(ev, ReasonExhausted) || !strings.Contains(ev, "Egress/c") {
		t.Errorf("event %q, want %s naming Egress/c", ev, ReasonExhausted)
	}
	waitUsage := func(total, used int) {
		t.Helper()
		var last crdv1beta1.IPPoolUsage
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := client.CrdV1beta1().ExternalIPPools().Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = p.Status.Usage
			return last.Total == total && last.Used == used, nil
		})
		if err != nil {
			t.Fatalf("status.usage %+v, want total %d used %d", last, total, used)
		}
	}
	waitUsage(3, 3)
	c.ReleaseIP("p", netip.MustParseAddr("10.0.0.1"), "Egress/a")
	waitUsage(3, 2)

	// Created again (a new UID): the Restorer's allocations are taken back first.
	if err := client.CrdV1beta1().ExternalIPPools().Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := pool.DeepCopy()
	again.UID = "uid-2"
	if _, err := client.CrdV1beta1().ExternalIPPools().Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, err := c.lister.Get("p")
		return err == nil && obj.UID == "uid-2", nil
	})
	if err != nil {
		t.Fatal("the informer never saw the new pool")
	}
	if ip, err := c.AllocateIP("p", "Egress/d"); err != nil || ip.String() != "10.0.0.1" {
		t.Errorf("in the new pool: %v, %v; want 10.0.0.1 (10.0.0.2 restored)", ip, err)
	}
}
