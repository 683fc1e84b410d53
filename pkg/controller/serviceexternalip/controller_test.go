package serviceexternalip_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/externalippool"
	"antrea.io/antrea/pkg/controller/serviceexternalip"
)

// cluster is a real kube-apiserver with the ExternalIPPool CRD (no
// webhooks: the controller must cope with what they let through).
type cluster struct {
	crd  versioned.Interface
	kube kubernetes.Interface
}

const ns = "default"

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cp := apiservertest.Start(t)
	data, err := os.ReadFile(filepath.Join(apiservertest.RepoRoot(), "build/charts/antrea/crds/crd.antrea.io_externalippools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &cluster{crd: versioned.NewForConfigOrDie(cp.Config), kube: kubernetes.NewForConfigOrDie(cp.Config)}
	c.eventually(t, "the CRD is served", func(ctx context.Context) bool {
		_, err := c.crd.CrdV1beta1().ExternalIPPools().List(ctx, metav1.ListOptions{})
		return err == nil
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

// controllers are one run of the ExternalIPPool and ServiceExternalIP
// controllers, as antrea-controller runs them, with the Events they record.
type controllers struct {
	recorder *record.FakeRecorder
	stop     context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	events []string
}

func (c *cluster) start(t *testing.T) *controllers {
	t.Helper()
	return c.startWithDefault(t, "")
}

// startWithDefault is start with a default pool (antrea-controller.conf
// serviceExternalIP.defaultExternalIPPool).
func (c *cluster) startWithDefault(t *testing.T, defaultPool string) *controllers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kubeInf := informers.NewSharedInformerFactory(c.kube, 0)
	crdInf := crdinformers.NewSharedInformerFactory(c.crd, 0)
	rec := record.NewFakeRecorder(1000)
	pools, err := externalippool.NewController(c.crd, crdInf.Crd().V1beta1().ExternalIPPools(), rec)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := serviceexternalip.NewController(c.kube, kubeInf.Core().V1().Services(), pools, rec, defaultPool)
	if err != nil {
		t.Fatal(err)
	}
	kubeInf.Start(ctx.Done())
	crdInf.Start(ctx.Done())
	ctrls := &controllers{recorder: rec, stop: cancel, done: make(chan struct{})}
	go pools.Run(ctx)
	go func() {
		defer close(ctrls.done)
		svc.Run(ctx, 2)
	}()
	t.Cleanup(ctrls.shutdown)
	return ctrls
}

func (ctrls *controllers) shutdown() {
	ctrls.stop()
	<-ctrls.done
}

// waitEvent waits for an Event whose text holds every part.
func (ctrls *controllers) waitEvent(t *testing.T, parts ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ctrls.mu.Lock()
		defer ctrls.mu.Unlock()
		for {
			select {
			case e := <-ctrls.recorder.Events:
				ctrls.events = append(ctrls.events, e)
				continue
			default:
			}
			break
		}
		for _, e := range ctrls.events {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(e, p)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event with %q among %q", parts, ctrls.events)
	}
}

// countEvents is the number of Events recorded so far holding part.
func (ctrls *controllers) countEvents(part string) int {
	ctrls.mu.Lock()
	defer ctrls.mu.Unlock()
	for len(ctrls.recorder.Events) > 0 {
		ctrls.events = append(ctrls.events, <-ctrls.recorder.Events)
	}
	n := 0
	for _, e := range ctrls.events {
		if strings.Contains(e, part) {
			n++
		}
	}
	return n
}

func (c *cluster) createPool(t *testing.T, name string, ranges ...crdv1beta1.IPRange) {
	t.Helper()
	p := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: ranges}}
	if _, err := c.crd.CrdV1beta1().ExternalIPPools().Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.crd.CrdV1beta1().ExternalIPPools().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createService creates a LoadBalancer Service annotated with pool (none
// when ""), after edit.
func (c *cluster) createService(t *testing.T, name, pool string, edit ...func(*corev1.Service)) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(9376)}}}}
	if pool != "" {
		svc.Annotations = map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: pool}
	}
	for _, e := range edit {
		e(svc)
	}
	if _, err := c.kube.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func (c *cluster) updateService(t *testing.T, name string, edit func(*corev1.Service)) {
	t.Helper()
	svc, err := c.kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(svc)
	if _, err := c.kube.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ingress is the Service's status.loadBalancer.ingress as "ip/ipMode ...".
func (c *cluster) ingress(ctx context.Context, name string) string {
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		mode := "<nil>"
		if in.IPMode != nil {
			mode = string(*in.IPMode)
		}
		out = append(out, in.IP+"/"+mode)
	}
	return strings.Join(out, " ")
}

func (c *cluster) waitIngress(t *testing.T, name, want string) {
	t.Helper()
	got := ""
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = c.ingress(ctx, name)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("Service %s has ingress %q, want %q", name, got, want)
	}
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

// TestLoadBalancerServicesTakeTheirIPFromTheAnnotatedPool runs the
// controllers against a real kube-apiserver: an annotated LoadBalancer gets
// the pool's lowest free IP in its status (ipMode VIP) and the pool's usage
// counts it; loadBalancerIP is honoured when in the pool and refused with a
// Warning Event when not; a Service past the pool's size gets a Warning
// Event; the IP is released when its Service is deleted, stops being a
// LoadBalancer or loses the annotation; a Service without the annotation
// gets one Normal Event and no IP; a Service with a loadBalancerClass is
// left to its class.
func TestLoadBalancerServicesTakeTheirIPFromTheAnnotatedPool(t *testing.T) {
	c := newCluster(t)
	ctrls := c.start(t)
	c.createPool(t, "service-external-ip-pool", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.4"})

	c.createService(t, "web", "service-external-ip-pool")
	c.waitIngress(t, "web", "10.10.0.2/VIP")
	ctrls.waitEvent(t, "Normal", serviceexternalip.ReasonAllocated, "Allocated 10.10.0.2 from ExternalIPPool service-external-ip-pool")
	c.waitUsage(t, "service-external-ip-pool", 3, 1)

	c.createService(t, "fixed", "service-external-ip-pool", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.10.0.4" })
	c.waitIngress(t, "fixed", "10.10.0.4/VIP")

	c.createService(t, "outside", "service-external-ip-pool", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.99.0.1" })
	ctrls.waitEvent(t, "Warning", serviceexternalip.ReasonAllocationError, "spec.loadBalancerIP 10.99.0.1", "not in the ExternalIPPool")
	if got := c.ingress(context.Background(), "outside"); got != "" {
		t.Errorf("a Service asking for an IP outside its pool got %q", got)
	}

	c.createService(t, "third", "service-external-ip-pool")
	c.waitIngress(t, "third", "10.10.0.3/VIP")
	c.waitUsage(t, "service-external-ip-pool", 3, 3)
	c.createService(t, "late", "service-external-ip-pool")
	ctrls.waitEvent(t, "Warning", serviceexternalip.ReasonAllocationError, "no IP left in the ExternalIPPool")
	ctrls.waitEvent(t, "Warning", externalippool.ReasonExhausted)

	c.createService(t, "nopool", "")
	c.createService(t, "missing", "no-such-pool")
	ctrls.waitEvent(t, "Warning", serviceexternalip.ReasonAllocationError, "no-such-pool", "ExternalIPPool not found")
	ctrls.waitEvent(t, "Normal", serviceexternalip.ReasonNoPool, "no service.antrea.io/external-ip-pool annotation")
	c.createService(t, "classy", "service-external-ip-pool", func(s *corev1.Service) {
		class := "example.com/other-lb"
		s.Spec.LoadBalancerClass = &class
	})
	ctrls.waitEvent(t, "Normal", serviceexternalip.ReasonOtherClass, `"example.com/other-lb"`)

	// Deleted: web's IP goes to the waiting Service.
	if err := c.kube.CoreV1().Services(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitIngress(t, "late", "10.10.0.2/VIP")
	// No longer a LoadBalancer: third's IP is released (and its status emptied).
	c.updateService(t, "third", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
	c.waitUsage(t, "service-external-ip-pool", 3, 2)
	c.waitIngress(t, "third", "")
	// The annotation removed: fixed's IP is released and its status emptied.
	c.updateService(t, "fixed", func(s *corev1.Service) {
		delete(s.Annotations, crdv1beta1.ServiceExternalIPPoolAnnotationKey)
	})
	c.waitUsage(t, "service-external-ip-pool", 3, 1)
	c.waitIngress(t, "fixed", "")
	// The IP outside the pool corrected: the Service gets it.
	c.updateService(t, "outside", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.10.0.3" })
	c.waitIngress(t, "outside", "10.10.0.3/VIP")
	c.waitUsage(t, "service-external-ip-pool", 3, 2)
	// One for nopool, one for fixed once its annotation went, however many
	// times they were synced.
	if n := ctrls.countEvents(serviceexternalip.ReasonNoPool); n != 2 {
		t.Errorf("%d %s Events, want two", n, serviceexternalip.ReasonNoPool)
	}
}

// TestServiceIPsSurviveARestartAndAPoolRecreated: after a restart the held
// IPs are restored from the Services' statuses before a new Service is
// served (no IP given twice); a pool deleted and created again gives the
// Services their IPs back; moving a Service to another pool frees its IP;
// the Service's ipFamilies decide the family of its IP.
func TestServiceIPsSurviveARestartAndAPoolRecreated(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	first := c.start(t)
	c.createPool(t, "pool-a", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.4"})
	c.createService(t, "s1", "pool-a")
	c.waitIngress(t, "s1", "10.10.0.2/VIP")
	c.createService(t, "s2", "pool-a")
	c.waitIngress(t, "s2", "10.10.0.3/VIP")
	first.shutdown()

	c.createService(t, "s3", "pool-a")
	c.start(t)
	c.waitIngress(t, "s3", "10.10.0.4/VIP")
	c.waitUsage(t, "pool-a", 3, 3)
	for name, want := range map[string]string{"s1": "10.10.0.2/VIP", "s2": "10.10.0.3/VIP"} {
		if got := c.ingress(ctx, name); got != want {
			t.Errorf("after a restart %s has %q, want %q", name, got, want)
		}
	}

	// pool-a deleted (the webhook would refuse): the Services keep their
	// status; created again (larger): they keep their IPs, a new Service
	// takes the new one.
	if err := c.crd.CrdV1beta1().ExternalIPPools().Delete(ctx, "pool-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "pool-a is gone", func(ctx context.Context) bool {
		_, err := c.crd.CrdV1beta1().ExternalIPPools().Get(ctx, "pool-a", metav1.GetOptions{})
		return err != nil
	})
	c.createPool(t, "pool-a", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.5"})
	c.createService(t, "s4", "pool-a")
	c.waitIngress(t, "s4", "10.10.0.5/VIP")
	c.waitUsage(t, "pool-a", 4, 4)
	for name, want := range map[string]string{"s1": "10.10.0.2/VIP", "s2": "10.10.0.3/VIP", "s3": "10.10.0.4/VIP"} {
		if got := c.ingress(ctx, name); got != want {
			t.Errorf("after pool-a was created again %s has %q, want %q", name, got, want)
		}
	}

	// A pool whose first range is IPv6: an IPv4 Service (envtest serves
	// IPv4 only) gets an IPv4 IP; s1 moved there frees its pool-a IP.
	c.createPool(t, "pool-b", crdv1beta1.IPRange{CIDR: "fd00:10::/126"}, crdv1beta1.IPRange{CIDR: "10.20.0.0/30"})
	c.updateService(t, "s1", func(s *corev1.Service) {
		s.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey] = "pool-b"
	})
	c.waitIngress(t, "s1", "10.20.0.1/VIP")
	c.waitUsage(t, "pool-a", 4, 3)
	c.waitUsage(t, "pool-b", 5, 1)
}

// service reads the Service (failing the test when it cannot).
func (c *cluster) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	svc, err := c.kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestADefaultPoolServesUnannotatedServicesAndTheFinalizerGuardsTheIP: with
// a default pool configured, a LoadBalancer Service without the annotation
// is given it once the pool exists (written on the Service, with a Normal
// Event) and an IP; one
// with a loadBalancerClass is not. A Service holding an IP carries the
// cleanup finalizer, which goes when it stops being a LoadBalancer and
// when it is deleted (after its IP is released: a real kube-apiserver
// keeps the Service until then).
func TestADefaultPoolServesUnannotatedServicesAndTheFinalizerGuardsTheIP(t *testing.T) {
	c := newCluster(t)
	ctrls := c.startWithDefault(t, "lb-default")
	c.createService(t, "classy", "", func(s *corev1.Service) {
		class := "example.com/other-lb"
		s.Spec.LoadBalancerClass = &class
	})
	// Before the default pool exists: an Event says so, nothing is written.
	c.createService(t, "plain", "")
	ctrls.waitEvent(t, "Normal", serviceexternalip.ReasonNoPool, "the default ExternalIPPool lb-default does not exist")
	if a := c.service(t, "plain").Annotations; a[crdv1beta1.ServiceExternalIPPoolAnnotationKey] != "" {
		t.Errorf("plain was given the default pool before it existed: %v", a)
	}
	c.createPool(t, "lb-default", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.3"})
	c.waitIngress(t, "plain", "10.10.0.2/VIP")
	ctrls.waitEvent(t, "Normal", serviceexternalip.ReasonDefaultPool, "ExternalIPPool lb-default is the default")
	plain := c.service(t, "plain")
	if got := plain.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]; got != "lb-default" {
		t.Errorf("plain's pool annotation is %q, want the default lb-default", got)
	}
	hasFinalizer := func(name string) bool {
		return slices.Contains(c.service(t, name).Finalizers, serviceexternalip.CleanupFinalizer)
	}
	if !hasFinalizer("plain") {
		t.Errorf("plain holds an IP without the finalizer: %v", plain.Finalizers)
	}
	classy := c.service(t, "classy")
	if _, ok := classy.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]; ok || len(classy.Finalizers) != 0 ||
		len(classy.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("a Service with a loadBalancerClass was taken: %+v %v %+v", classy.Annotations, classy.Finalizers, classy.Status.LoadBalancer)
	}

	c.updateService(t, "plain", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
	c.waitIngress(t, "plain", "")
	c.waitUsage(t, "lb-default", 2, 0)
	c.eventually(t, "the finalizer goes with the IP", func(context.Context) bool { return !hasFinalizer("plain") })

	c.updateService(t, "plain", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	c.waitIngress(t, "plain", "10.10.0.2/VIP")
	c.eventually(t, "the finalizer comes back with the IP", func(context.Context) bool { return hasFinalizer("plain") })

	if err := c.kube.CoreV1().Services(ns).Delete(context.Background(), "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, "the deleted Service is gone", func(ctx context.Context) bool {
		_, err := c.kube.CoreV1().Services(ns).Get(ctx, "plain", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	c.waitUsage(t, "lb-default", 2, 0)
}
