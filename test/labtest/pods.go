package labtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/lab"
)

// PollInterval spaces the attempts of Poll.
const PollInterval = 200 * time.Millisecond

// Poll calls cond every PollInterval until it returns nil or ctx ends; cond's
// error says what is still missing, and the last one is in Poll's error.
func Poll(ctx context.Context, what string, cond func() error) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// WaitFor is Poll that fails the test when ctx ends first.
func WaitFor(t testing.TB, ctx context.Context, what string, cond func() error) {
	t.Helper()
	if err := Poll(ctx, what, cond); err != nil {
		t.Fatal(err)
	}
}

// PodReady tells whether the pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CheckPodUsable returns why a pod cannot be probed yet: it must be Ready,
// not being deleted, with an IP, and its netns must be found (PodNetNS).
func CheckPodUsable(p *corev1.Pod) error {
	switch {
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s/%s is being deleted", p.Namespace, p.Name)
	case p.Status.PodIP == "":
		return fmt.Errorf("pod %s/%s has no IP yet (phase %s)", p.Namespace, p.Name, p.Status.Phase)
	case !PodReady(p):
		return fmt.Errorf("pod %s/%s is not Ready (phase %s%s)", p.Namespace, p.Name, p.Status.Phase, waitingReasons(p))
	}
	_, err := PodNetNS(p)
	return err
}

// waitingReasons are the reasons the pod's containers wait (ErrImagePull,
// CrashLoopBackOff, ...), for error messages.
func waitingReasons(p *corev1.Pod) string {
	var rs []string
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			rs = append(rs, cs.Name+": "+w.Reason)
		}
	}
	if len(rs) == 0 {
		return ""
	}
	return ", " + strings.Join(rs, ", ")
}

// WaitPodsUsable waits until every named pod of the namespace passes
// CheckPodUsable and returns them by name.
func WaitPodsUsable(ctx context.Context, client kubernetes.Interface, namespace string, names []string) (map[string]*corev1.Pod, error) {
	pods := map[string]*corev1.Pod{}
	err := Poll(ctx, fmt.Sprintf("%d pods of namespace %s Ready", len(names), namespace), func() error {
		var waiting []string
		for _, name := range names {
			p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, err.Error())
				continue
			}
			if err := CheckPodUsable(p); err != nil {
				waiting = append(waiting, err.Error())
				continue
			}
			pods[name] = p
		}
		if len(waiting) > 0 {
			sort.Strings(waiting)
			return errors.New(strings.Join(waiting, "; "))
		}
		return nil
	})
	return pods, err
}

// CreateNamespace creates a namespace and waits for its default
// ServiceAccount (kube-controller-manager makes it; pods need it).
func CreateNamespace(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return WaitDefaultServiceAccount(ctx, client, name)
}

// WaitDefaultServiceAccount waits for the namespace's default ServiceAccount.
func WaitDefaultServiceAccount(ctx context.Context, client kubernetes.Interface, namespace string) error {
	return Poll(ctx, "ServiceAccount "+namespace+"/default", func() error {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// WaitGone waits until get returns NotFound.
func WaitGone(ctx context.Context, what string, get func() error) error {
	return Poll(ctx, what+" gone", func() error {
		err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still exists", what)
		}
		return err
	})
}

// TestPodContainer is a container serving the given TCP and UDP ports (TCP
// and UDP 80 and 81 when both are empty) and answering with the pod's name.
// On a real node it runs lab.TestPodImage with `serve` args for the ports;
// the node simulator, which runs no image, serves the declared containerPorts
// with the host's antrea-testpod. Each port is declared as serve-<port>-<proto>,
// the names cyclonus' policies refer to. A startup probe from inside the
// container (loopback, which no NetworkPolicy touches) keeps the pod from
// being Ready before it serves.
func TestPodContainer(name string, tcp, udp []int) corev1.Container {
	c := corev1.Container{
		Name:            name,
		Image:           lab.TestPodImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{"serve"},
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
	}
	join := func(ports []int) string {
		s := make([]string, len(ports))
		for i, p := range ports {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, ",")
	}
	if len(tcp) > 0 {
		c.Args = append(c.Args, "--tcp", join(tcp))
	}
	if len(udp) > 0 {
		c.Args = append(c.Args, "--udp", join(udp))
	}
	for _, p := range tcp {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: fmt.Sprintf("serve-%d-tcp", p), ContainerPort: int32(p), Protocol: corev1.ProtocolTCP})
	}
	for _, p := range udp {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: fmt.Sprintf("serve-%d-udp", p), ContainerPort: int32(p), Protocol: corev1.ProtocolUDP})
	}
	proto, port := "tcp", 80
	switch {
	case len(tcp) > 0:
		port = tcp[0]
	case len(udp) > 0:
		proto, port = "udp", udp[0]
	}
	c.StartupProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
			"/antrea-testpod", "connect", "--protocol", proto, "--to", "127.0.0.1:" + strconv.Itoa(port), "--timeout", "1s"}}},
		PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 60,
	}
	return c
}

// PodNetNS is the path of a pod's network namespace that host tools can
// enter (nsenter --net=PATH, ns.GetNS): /proc/<pid>/ns/net of a process of
// the pod on a real node, /var/run/netns/<name> on a simulated one.
func PodNetNS(p *corev1.Pod) (string, error) { return lab.NetNSPathOfPod(p) }
