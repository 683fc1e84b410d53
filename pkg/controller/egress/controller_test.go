package egress_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/egress"
	"antrea.io/antrea/pkg/controller/externalippool"
)

// cluster is a real kube-apiserver with the Egress and ExternalIPPool CRDs
// (no webhooks: the controllers must cope with what they let through).
type cluster struct {
	cp   *apiservertest.ControlPlane
	crd  versioned.Interface
	kube kubernetes.Interface
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cp := apiservertest.Start(t)
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	for _, plural := range []string{"egresses", "externalippools"} {
		data, err := os.ReadFile(filepath.Join(apiservertest.RepoRoot(), "build/charts/antrea/crds/crd.antrea.io_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatal(err)
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{cp: cp, crd: versioned.NewForConfigOrDie(cp.Config), kube: kubernetes.NewForConfigOrDie(cp.Config)}
	// Established: a list succeeds.
	c.eventually(t, "the CRDs are served", func(ctx context.Context) bool {
		_, err1 := c.crd.CrdV1beta1().Egresses().List(ctx, metav1.ListOptions{})
		_, err2 := c.crd.CrdV1beta1().ExternalIPPools().List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil
	})
	return c
}

func (c *cluster) eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) { return cond(ctx), nil })
	if err != nil {
		t.Fatalf("%s: never", what)
	}
}

// controllers are one run of the ExternalIPPool and Egress controllers, as
// antrea-controller runs them.
type controllers struct {
	store    storage.Interface
	recorder *record.FakeRecorder
	stop     context.CancelFunc
	done     chan struct{}
}

func (c *cluster) start(t *testing.T) *controllers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kubeInf := informers.NewSharedInformerFactory(c.kube, 0)
	crdInf := crdinformers.NewSharedInformerFactory(c.crd, 0)
	rec := record.NewFakeRecorder(100)
	pools, err := externalippool.NewController(c.crd, crdInf.Crd().V1beta1().ExternalIPPools(), rec)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewEgressGroupStore()
	eg, err := egress.NewController(c.crd, crdInf.Crd().V1beta1().Egresses(), kubeInf.Core().V1().Pods().Informer(),
		kubeInf.Core().V1().Namespaces().Informer(), pools, store, rec)
	if err != nil {
		t.Fatal(err)
	}
	kubeInf.Start(ctx.Done())
	crdInf.Start(ctx.Done())
	ctrls := &controllers{store: store, recorder: rec, stop: cancel, done: make(chan struct{})}
	go pools.Run(ctx)
	go func() {
		defer close(ctrls.done)
		eg.Run(ctx, 2)
	}()
	t.Cleanup(ctrls.shutdown)
	return ctrls
}

func (ctrls *controllers) shutdown() {
	ctrls.stop()
	<-ctrls.done
}

func (c *cluster) createPool(t *testing.T, name string, ranges ...crdv1beta1.IPRange) {
	t.Helper()
	p := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: ranges}}
	if _, err := c.crd.CrdV1beta1().ExternalIPPools().Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.crd.CrdV1beta1().ExternalIPPools().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func (c *cluster) createEgress(t *testing.T, name, pool string, at crdv1beta1.EgressAppliedTo) {
	t.Helper()
	eg := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: crdv1beta1.EgressSpec{AppliedTo: at, ExternalIPPool: pool}}
	if _, err := c.crd.CrdV1beta1().Egresses().Create(context.Background(), eg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.crd.CrdV1beta1().Egresses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// egressIP waits until the Egress's spec.egressIP is set and returns it.
func (c *cluster) egressIP(t *testing.T, name string) string {
	t.Helper()
	ip := ""
	c.eventually(t, "Egress "+name+" gets an IP", func(ctx context.Context) bool {
		eg, err := c.crd.CrdV1beta1().Egresses().Get(ctx, name, metav1.GetOptions{})
		ip = ""
		if err == nil {
			ip = eg.Spec.EgressIP
		}
		return ip != ""
	})
	return ip
}

func (c *cluster) waitUsage(t *testing.T, pool string, total, used int) {
	t.Helper()
	var got crdv1beta1.IPPoolUsage
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.crd.CrdV1beta1().ExternalIPPools().Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p.Status.Usage
		return got.Total == total && got.Used == used, nil
	})
	if err != nil {
		t.Fatalf("pool %s usage is %+v, want total %d used %d", pool, got, total, used)
	}
}

var web = crdv1beta1.EgressAppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}

// TestEgressIPsComeFromThePoolAndSurviveARestart runs the controllers
// against a real kube-apiserver: Egresses without an IP get the pool's
// lowest free IPs written into spec.egressIP, the pool's status counts them,
// an Egress past the pool's size gets the IPAllocated condition False and
// the pool an exhaustion Event, a deleted Egress's IP goes to the waiting
// one; after a restart the held IPs are restored before a new Egress is
// served, and an Egress moved to another pool takes an IP there and frees
// its old one.
func TestEgressIPsComeFromThePoolAndSurviveARestart(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	first := c.start(t)
	c.createPool(t, "pool-a", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.3"})
	c.createEgress(t, "e1", "pool-a", web)
	if ip := c.egressIP(t, "e1"); ip != "10.10.0.2" {
		t.Fatalf("e1 got %s, want the pool's first IP 10.10.0.2", ip)
	}
	c.createEgress(t, "e2", "pool-a", web)
	if ip := c.egressIP(t, "e2"); ip != "10.10.0.3" {
		t.Fatalf("e2 got %s, want 10.10.0.3", ip)
	}
	c.waitUsage(t, "pool-a", 2, 2)

	c.createEgress(t, "e3", "pool-a", web)
	c.eventually(t, "e3 says the pool is exhausted", func(ctx context.Context) bool {
		eg, err := c.crd.CrdV1beta1().Egresses().Get(ctx, "e3", metav1.GetOptions{})
		if err != nil || eg.Spec.EgressIP != "" {
			return false
		}
		for _, cond := range eg.Status.Conditions {
			if cond.Type == crdv1beta1.IPAllocated && cond.Status == corev1.ConditionFalse && cond.Reason == "PoolExhausted" {
				return true
			}
		}
		return false
	})
	exhausted := false
	for len(first.recorder.Events) > 0 && !exhausted {
		exhausted = strings.Contains(<-first.recorder.Events, externalippool.ReasonExhausted)
	}
	if !exhausted {
		t.Error("no exhaustion Event was recorded")
	}

	if err := c.crd.CrdV1beta1().Egresses().Delete(ctx, "e1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip := c.egressIP(t, "e3"); ip != "10.10.0.2" {
		t.Fatalf("e3 got %s, want e1's released 10.10.0.2", ip)
	}
	c.waitUsage(t, "pool-a", 2, 2)

	// A restart: the new controllers must not hand out e2's or e3's IP.
	first.shutdown()
	p, err := c.crd.CrdV1beta1().ExternalIPPools().Get(ctx, "pool-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.IPRanges = append(p.Spec.IPRanges, crdv1beta1.IPRange{CIDR: "10.10.1.0/30"})
	if _, err := c.crd.CrdV1beta1().ExternalIPPools().Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createEgress(t, "e4", "pool-a", web)
	c.start(t)
	if ip := c.egressIP(t, "e4"); ip != "10.10.1.1" {
		t.Fatalf("after a restart e4 got %s, want 10.10.1.1 (10.10.0.2 and .3 are held)", ip)
	}
	c.waitUsage(t, "pool-a", 4, 3)

	// Another pool: e4's IP moves there and its old one is freed.
	c.createPool(t, "pool-b", crdv1beta1.IPRange{CIDR: "fd00:10::/126"})
	e4, err := c.crd.CrdV1beta1().Egresses().Get(ctx, "e4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e4.Spec.ExternalIPPool, e4.Spec.EgressIP = "pool-b", ""
	if _, err := c.crd.CrdV1beta1().Egresses().Update(ctx, e4, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip := c.egressIP(t, "e4"); ip != "fd00:10::1" {
		t.Fatalf("e4 in pool-b got %s, want fd00:10::1", ip)
	}
	c.waitUsage(t, "pool-b", 3, 1)
	c.waitUsage(t, "pool-a", 4, 2)

	// upstream's form with several pools (one IPv4, one IPv6): an IP from each,
	// written into egressIPs at the pools' indexes, freed with the Egress.
	dual := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "e5"},
		Spec: crdv1beta1.EgressSpec{AppliedTo: web, ExternalIPPools: []string{"pool-a", "pool-b"}}}
	if _, err := c.crd.CrdV1beta1().Egresses().Create(ctx, dual, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ips []string
	c.eventually(t, "e5 gets an IP of each pool", func(ctx context.Context) bool {
		eg, err := c.crd.CrdV1beta1().Egresses().Get(ctx, "e5", metav1.GetOptions{})
		if err != nil {
			return false
		}
		ips = eg.Spec.EgressIPs
		return len(ips) == 2 && ips[0] != "" && ips[1] != ""
	})
	if ips[0] != "10.10.1.1" || ips[1] != "fd00:10::2" {
		t.Errorf("e5 got %v, want [10.10.1.1 (e4's, freed) fd00:10::2]", ips)
	}
	c.waitUsage(t, "pool-a", 4, 3)
	c.waitUsage(t, "pool-b", 3, 2)
	if err := c.crd.CrdV1beta1().Egresses().Delete(ctx, "e5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitUsage(t, "pool-a", 4, 2)
	c.waitUsage(t, "pool-b", 3, 1)

	// pool-b deleted (the webhook would refuse: e4 holds an IP of it) and
	// created again: e4 keeps fd00:10::1, a new Egress gets another.
	if err := c.crd.CrdV1beta1().ExternalIPPools().Delete(ctx, "pool-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "pool-b is gone", func(ctx context.Context) bool {
		_, err := c.crd.CrdV1beta1().ExternalIPPools().Get(ctx, "pool-b", metav1.GetOptions{})
		return err != nil
	})
	c.createPool(t, "pool-b", crdv1beta1.IPRange{CIDR: "fd00:10::/126"})
	c.createEgress(t, "e6", "pool-b", web)
	if ip := c.egressIP(t, "e6"); ip != "fd00:10::2" {
		t.Fatalf("e6 in the new pool-b got %s, want fd00:10::2 (e4 holds fd00:10::1)", ip)
	}
	c.waitUsage(t, "pool-b", 3, 2)
}

func (c *cluster) createPod(t *testing.T, ns, name, node, ip string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	created, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// members lists the Pods of the EgressGroup as the selector sees them
// ("ns/name ip", sorted).
func members(store storage.Interface, name, node string) []string {
	sel := &storage.Selectors{Key: name}
	if node != "" {
		sel.Field = fields.OneTermEqualSelector(storage.NodeNameField, node)
	}
	objs, _ := store.ListObjects(sel)
	var out []string
	for _, o := range objs {
		for _, m := range o.(*controlplane.EgressGroup).GroupMembers {
			out = append(out, m.Pod.Namespace+"/"+m.Pod.Name+" "+net.IP(m.IPs[0]).String())
		}
	}
	sort.Strings(out)
	return out
}

// TestEgressGroupsHoldTheSelectedPodsPerNode: the EgressGroup of an Egress
// holds the Pods its appliedTo selects (namespaceSelector and podSelector
// together), a Node's reader sees only its Node's members, a reader without
// a Node sees them all, and the group follows Pods and Namespace labels.
func TestEgressGroupsHoldTheSelectedPodsPerNode(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	ctrls := c.start(t)
	for ns, env := range map[string]string{"prod": "prod", "staging": "staging"} {
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"env": env}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.createPod(t, "prod", "web-1", "n1", "10.244.1.5", map[string]string{"app": "web"})
	c.createPod(t, "prod", "web-2", "n2", "10.244.2.5", map[string]string{"app": "web"})
	c.createPod(t, "prod", "db", "n1", "10.244.1.6", map[string]string{"app": "db"})
	c.createPod(t, "staging", "web-3", "n1", "10.244.1.7", map[string]string{"app": "web"})
	c.createPool(t, "pool", crdv1beta1.IPRange{CIDR: "10.10.1.0/28"})
	c.createEgress(t, "egress-prod-web", "pool", crdv1beta1.EgressAppliedTo{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	})
	eq := func(got []string, want ...string) bool { return strings.Join(got, ",") == strings.Join(want, ",") }
	c.eventually(t, "the group holds prod's web Pods", func(context.Context) bool {
		return eq(members(ctrls.store, "egress-prod-web", ""), "prod/web-1 10.244.1.5", "prod/web-2 10.244.2.5")
	})
	if got := members(ctrls.store, "egress-prod-web", "n1"); !eq(got, "prod/web-1 10.244.1.5") {
		t.Errorf("n1 sees %v, want prod/web-1 only", got)
	}
	if got := members(ctrls.store, "egress-prod-web", "n3"); len(got) != 0 {
		t.Errorf("n3, without members, sees %v", got)
	}
	// staging joins prod's labels: its web Pod joins the group.
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, "staging", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["env"] = "prod"
	if _, err := c.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "staging's web Pod joins", func(context.Context) bool {
		return eq(members(ctrls.store, "egress-prod-web", "n1"), "prod/web-1 10.244.1.5", "staging/web-3 10.244.1.7")
	})
	// No kubelet here: the Pod goes at once (no grace period).
	if err := c.kube.CoreV1().Pods("prod").Delete(ctx, "web-2", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "the deleted Pod leaves", func(context.Context) bool {
		return eq(members(ctrls.store, "egress-prod-web", ""), "prod/web-1 10.244.1.5", "staging/web-3 10.244.1.7")
	})
	if err := c.crd.CrdV1beta1().Egresses().Delete(ctx, "egress-prod-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "the group goes with its Egress", func(context.Context) bool {
		_, exists, _ := ctrls.store.Get("egress-prod-web")
		return !exists
	})
}
