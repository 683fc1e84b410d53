package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
	trials, _ := strconv.Atoi(os.Getenv(envLBFailoverTrials))
	// A failover trial takes about 45 s (cut, detection, heal, return,
	// settle).
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute+time.Duration(max(trials, 0))*time.Minute)
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
			if policy == corev1.ServiceExternalTrafficPolicyCluster && trials > 0 {
				// Failover cuts one node off: an endpoint on each
				// node keeps the Service served from either.
				createPodsIn(t, e, ctx, ns, func(string) corev1.PodSpec {
					return corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "web", Image: lab.AgnhostImage,
						Args: []string{"netexec", "--http-port=8080"}}}}
				}, "web-2")
			}
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
			if policy == corev1.ServiceExternalTrafficPolicyCluster && trials > 0 {
				lbFailoverTrials(t, ctx, ip, trials, func() error {
					out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.OutsideNetNS, "curl", "-sS", "-m", "0.5", url).CombinedOutput()
					if err != nil {
						return fmt.Errorf("%v: %s", err, out)
					}
					return nil
				})
			}
		})
	}
}

// envLBFailoverTrials (default 0: not in make test, where the Egress test
// times the same membership failover) is how many times
// TestLoadBalancerIPFromAnOutsideHost cuts the node answering for the
// LoadBalancer IP off the underlay and times the outside host's first new
// connection served again.
const envLBFailoverTrials = "ANTREA_LB_FAILOVER_TRIALS"

// lbFailoverSettle separates two failover trials.
const lbFailoverSettle = 20 * time.Second

// answering is the node whose agent answers ARP for ip (a proxy neighbour
// on its br-phy), "" when none or several do.
func answering(ctx context.Context, ip string) (string, error) {
	var found []string
	for _, n := range []string{"node-1", "node-2"} {
		out, err := exec.CommandContext(ctx, "ip", "-n", lab.NodeNetNS(n), "neigh", "show", "proxy", ip).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip neigh show proxy on %s: %v: %s", n, err, out)
		}
		if strings.Contains(string(out), ip) {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("nodes answering for %s: %v", ip, found)
	}
	return found[0], nil
}

// lbFailoverTrials cuts the node answering for ip off the underlay, times
// until reach (a new connection from the outside host) succeeds again,
// heals the link and waits for the IP to return, trials times; it logs the
// percentiles. Before each cut the outside host forgets its ARP entry for
// ip and reaches it once, so it sends to the holder (an entry left pointing
// at the other node, which also routes LoadBalancer IPs, would hide the
// failover).
func lbFailoverTrials(t *testing.T, ctx context.Context, ip string, trials int, reach func() error) {
	var times []time.Duration
	for i := 0; i < trials; i++ {
		var holder string
		labtest.WaitFor(t, ctx, "one node answers for "+ip, func() (err error) {
			holder, err = answering(ctx, ip)
			return err
		})
		if out, err := exec.CommandContext(ctx, "ip", "-n", lab.OutsideNetNS, "neigh", "flush", "to", ip).CombinedOutput(); err != nil {
			t.Fatalf("ip neigh flush: %v: %s", err, out)
		}
		labtest.WaitFor(t, ctx, "the outside host reaches "+ip+" through "+holder, reach)
		link := "v-" + holder
		setLink := func(state string) {
			if out, err := exec.CommandContext(context.Background(), "ip", "-n", lab.UnderlayNetNS, "link", "set", link, state).CombinedOutput(); err != nil {
				t.Fatalf("ip link set %s %s: %v: %s", link, state, err, out)
			}
		}
		t.Cleanup(func() { _ = exec.Command("ip", "-n", lab.UnderlayNetNS, "link", "set", link, "up").Run() })
		start := time.Now()
		setLink("down")
		labtest.WaitFor(t, ctx, "the outside host reaches "+ip+" again after "+holder+" failed", reach)
		times = append(times, time.Since(start))
		// The node cut off sees itself alone and keeps answering on its
		// side of the cut; the other must answer now.
		survivor := map[string]string{"node-1": "node-2", "node-2": "node-1"}[holder]
		if out, err := exec.CommandContext(ctx, "ip", "-n", lab.NodeNetNS(survivor), "neigh", "show", "proxy", ip).CombinedOutput(); err != nil || !strings.Contains(string(out), ip) {
			t.Errorf("after %s was cut off, %s does not answer for %s: %v %s", holder, survivor, ip, err, out)
		}
		setLink("up")
		labtest.WaitFor(t, ctx, ip+" returns to "+holder, func() error {
			got, err := answering(ctx, ip)
			if err == nil && got != holder {
				err = fmt.Errorf("%s answers", got)
			}
			return err
		})
		// Failures come apart in time. Back to back, 20 trials gave p50
		// 16 s, p99 21 s; 20 s apart, p50 6.7 s, p99 7.8 s. The likely
		// cause is memberlist's awareness score, which lengthens probe
		// timeouts after failed probes and recovers with successful ones
		// (not verified in memberlist).
		if i < trials-1 {
			time.Sleep(lbFailoverSettle)
		}
	}
	slices.Sort(times)
	t.Logf("LoadBalancer IP failover (%d trials): node cut off -> first new connection from the outside host served again: p50 %v, p99 %v, max %v",
		trials, times[len(times)/2].Round(10*time.Millisecond), times[(len(times)*99)/100].Round(10*time.Millisecond),
		times[len(times)-1].Round(10*time.Millisecond))
}
