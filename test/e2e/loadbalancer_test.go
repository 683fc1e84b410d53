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

// TestLoadBalancerIPFromAnOutsideHost: a Service of type LoadBalancer
// annotated with an ExternalIPPool gets an IP of it (antrea-controller),
// one node answers for it on the underlay (the agents), and the outside
// host reaches the Service's endpoint through it, under
// externalTrafficPolicy Cluster from anywhere, and under Local keeping its
// own address as the client's.
func TestLoadBalancerIPFromAnOutsideHost(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "web", Image: lab.AgnhostImage,
			Args: []string{"netexec", "--http-port=8080"}}}}
	}, "web")
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "lb-" + ns}}
	createExternalIPPool(t, ctx, crd, pool.Name, "172.30.0.240", "172.30.0.249", func() { deleteServices(e, ns) })
	outside := func(url string) (string, error) {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.OutsideNetNS, "curl", "-sS", "-m", "2", url).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for _, policy := range []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal} {
		t.Run(string(policy), func(t *testing.T) {
			svc, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "lb-" + strings.ToLower(string(policy)),
					Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: pool.Name}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy,
					Selector: map[string]string{"app": "e2e"},
					Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = e.Client.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
			}()
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
			url := "http://" + net.JoinHostPort(ip, "80") + "/clientip"
			labtest.WaitFor(t, ctx, "the outside host reaches the Service through "+ip, func() error {
				out, err := outside(url)
				if err != nil {
					return fmt.Errorf("%s: %v: %s", url, err, out)
				}
				host, _, err := net.SplitHostPort(out)
				if err != nil {
					return fmt.Errorf("%s answered %q", url, out)
				}
				if policy == corev1.ServiceExternalTrafficPolicyLocal && host != lab.OutsideIP().String() {
					return fmt.Errorf("Local: the endpoint saw %s, want the client %s", host, lab.OutsideIP())
				}
				return nil
			})
		})
	}
}
