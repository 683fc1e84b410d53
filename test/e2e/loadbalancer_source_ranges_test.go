package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestLoadBalancerSourceRanges: a LoadBalancer's spec.loadBalancerSourceRanges
// decide who connects through its ingress IP, as upstream's e2e "should
// only allow access from service loadbalancer source ranges" checks: open
// to everyone without ranges (the outside host, a pod on the endpoint's
// node, a pod on the other node); with the outside host's address only, it
// gets in and both pods are dropped (their connections time out); with the
// first pod's address, that pod gets in and the outside host and the other
// pod are dropped; cleared, everyone again.
func TestLoadBalancerSourceRanges(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		node := "node-1"
		if name == "client-b" {
			node = "node-2"
		}
		args := []string{"pause"}
		if name == "web" {
			args = []string{"netexec", "--http-port=8080"}
		}
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: lab.AgnhostImage,
			ImagePullPolicy: corev1.PullIfNotPresent, Args: args}}}
	}, "web", "client-a", "client-b")
	pool := "lbsr-" + ns
	createExternalIPPool(t, ctx, crd, pool, "172.30.0.240", "172.30.0.249", func() { deleteServices(e, ns) })
	svc, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb", Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: pool}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "e2e"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	labtest.WaitFor(t, ctx, "the Service has an ingress IP of the pool", func() error {
		s, err := e.Client.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP == "" {
			return fmt.Errorf("status %+v", s.Status.LoadBalancer)
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	addr := net.JoinHostPort(ip, "80")
	// connect says whether a client got in: nil, or why not ("TIMEOUT"
	// when dropped).
	connect := func(client string) error {
		if client == "outside" {
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.OutsideNetNS, "curl", "-sS", "-m", "1", "http://"+addr+"/hostname").CombinedOutput()
			if err != nil {
				if strings.Contains(string(out), "timed out") {
					return fmt.Errorf("TIMEOUT")
				}
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
		_, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, client, "--", "/agnhost", "connect", "--timeout=1s", addr)
		if err != nil {
			return fmt.Errorf("%s", strings.TrimSpace(stderr))
		}
		return nil
	}
	allowed := func(client string) {
		t.Helper()
		labtest.WaitFor(t, ctx, client+" connects to "+addr, func() error { return connect(client) })
	}
	dropped := func(client string, wait bool) {
		t.Helper()
		check := func() error {
			err := connect(client)
			if err == nil {
				return fmt.Errorf("%s got in", client)
			}
			if !strings.HasPrefix(err.Error(), "TIMEOUT") {
				return fmt.Errorf("%s should time out (dropped), got %v", client, err)
			}
			return nil
		}
		if wait {
			labtest.WaitFor(t, ctx, client+" is dropped at "+addr, check)
		} else if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	setRanges := func(ranges ...string) {
		t.Helper()
		s, err := e.Client.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.LoadBalancerSourceRanges = ranges
		if _, err := e.Client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Everyone first: the ingress IP is served on both nodes.
	for _, c := range []string{"outside", "client-a", "client-b"} {
		allowed(c)
	}
	// The outside host only: each node drops its pod (a drop can now only
	// come from the ranges).
	setRanges(lab.OutsideIP().String() + "/32")
	dropped("client-a", true)
	dropped("client-b", true)
	allowed("outside")
	// client-a only, by its pod IP.
	setRanges(pods["client-a"].Status.PodIP + "/32")
	allowed("client-a")
	dropped("outside", true)
	dropped("client-b", false)
	// Cleared: everyone again.
	setRanges()
	for _, c := range []string{"outside", "client-a", "client-b"} {
		allowed(c)
	}
}
