package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/nodeportlocal"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestNodePortLocalFromAnOutsideHost: upstream's usage, unchanged. A
// Deployment of two Pods (one per Node) and a ClusterIP Service annotated
// nodeportlocal.antrea.io/enabled: "true"; each Pod gets the annotation
// nodeportlocal.antrea.io, and the lab's outside host, which is no Node,
// connects to each nodeIP:nodePort and reaches that Pod (the test Pod
// answers with its name). Once the Service loses the annotation, the Pods
// lose theirs and the Nodes' DNAT maps are empty again.
func TestNodePortLocalFromAnOutsideHost(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	namespace := fmt.Sprintf("e2e-npl-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, namespace, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	})
	replicas := int32(2)
	labels := map[string]string{"app": "npl"}
	spread := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "npl"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Affinity: spread,
					Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80}, nil)}}}}}
	if _, err := e.Client.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "npl",
		Annotations: map[string]string{nodeportlocal.EnabledAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "web", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(80)}}}}
	if _, err := e.Client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Both Pods running, each with one mapping of its target port.
	mappings := map[string]nodeportlocal.Mapping{} // pod name: its mapping
	labtest.WaitFor(t, ctx, "both Pods have the annotation "+nodeportlocal.PodAnnotation, func() error {
		pods, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=npl"})
		if err != nil {
			return err
		}
		clear(mappings)
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			v, ok := p.Annotations[nodeportlocal.PodAnnotation]
			if !ok {
				return fmt.Errorf("pod %s has no annotation yet", p.Name)
			}
			ms, err := nodeportlocal.ParseAnnotation(v)
			if err != nil {
				return err
			}
			if len(ms) != 1 || ms[0].PodPort != 80 || ms[0].Protocol != "tcp" || len(ms[0].Protocols) != 1 ||
				ms[0].NodeIP != p.Status.HostIP || ms[0].NodePort < 61000 || ms[0].NodePort > 62000 {
				return fmt.Errorf("pod %s (node IP %s) has the annotation %s, want one TCP mapping of port 80 on its node IP from 61000-62000",
					p.Name, p.Status.HostIP, v)
			}
			mappings[p.Name] = ms[0]
		}
		if len(mappings) != 2 {
			return fmt.Errorf("%d Pods running with the annotation, want 2", len(mappings))
		}
		return nil
	})

	// antctl shows each Pod's mapping as the annotation says.
	out, errOut, err := antctl(ctx, e, "get", "nodeportlocal", "-n", namespace)
	if err != nil {
		t.Fatalf("antctl get nodeportlocal: %v: %s%s", err, out, errOut)
	}
	for pod, m := range mappings {
		row := fmt.Sprintf("%s %s", pod, net.JoinHostPort(m.NodeIP, fmt.Sprint(m.NodePort)))
		found := false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 6 && f[1]+" "+f[5] == row && f[3] == "80" && f[4] == "tcp" {
				found = true
			}
		}
		if !found {
			t.Errorf("antctl get nodeportlocal does not show %s:\n%s", row, out)
		}
	}

	outside, err := ns.GetNS("/var/run/netns/" + lab.OutsideNetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	for pod, m := range mappings {
		to := net.JoinHostPort(m.NodeIP, fmt.Sprint(m.NodePort))
		t.Run("the outside host reaches pod "+pod+" through "+to, func(t *testing.T) {
			labtest.WaitFor(t, ctx, "pod "+pod+" answers at "+to, func() error {
				name, err := askName(outside, to)
				if err != nil {
					return err
				}
				if name != pod {
					return fmt.Errorf("%s answered %q, want %q", to, name, pod)
				}
				return nil
			})
		})
	}

	t.Run("the mappings go when the Service loses the annotation", func(t *testing.T) {
		s, err := e.Client.CoreV1().Services(namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(s.Annotations, nodeportlocal.EnabledAnnotation)
		if _, err := e.Client.CoreV1().Services(namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		labtest.WaitFor(t, ctx, "no Pod has the annotation", func() error {
			pods, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=npl"})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if v, ok := p.Annotations[nodeportlocal.PodAnnotation]; ok {
					return fmt.Errorf("pod %s still has %s", p.Name, v)
				}
			}
			return nil
		})
		for pod, m := range mappings {
			pods, _ := e.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
			netns := lab.NetNSPrefix + pods.Spec.NodeName
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "nft", "list", "map", "inet", "antrea", "nodeportlocal-v4").CombinedOutput()
			if err != nil {
				t.Errorf("nft list map in %s: %v: %s", netns, err, out)
			} else if strings.Contains(string(out), fmt.Sprint(m.NodePort)) {
				t.Errorf("node %s still maps %d:\n%s", pods.Spec.NodeName, m.NodePort, out)
			}
			to := net.JoinHostPort(m.NodeIP, fmt.Sprint(m.NodePort))
			if name, err := askName(outside, to); err == nil {
				t.Errorf("%s still answers %q", to, name)
			}
		}
	})
}

// askName connects from netns to addr over TCP and returns the line the
// test Pod answers (its name).
func askName(netns ns.NetNS, addr string) (string, error) {
	var name string
	err := netns.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		name = strings.TrimSpace(line)
		if err != nil && name == "" {
			return err
		}
		return nil
	})
	return name, err
}
