package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// What kubelet does for workloads, done by the lab's real nodes: init
// containers before the app, several containers in one pod sharing volumes
// and the network, readiness and liveness probes (a failing liveness probe
// restarts the container), Jobs that complete, a DaemonSet with a pod on
// every node, a StatefulSet whose pods start in order, and graceful
// termination (the container gets SIGTERM and its handler runs).
func TestRealNodesRunWorkloadsAsKubeletDoes(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("workloads-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if err := labtest.WaitDefaultServiceAccount(ctx, e.Client, ns); err != nil {
		t.Fatal(err)
	}
	agnhost := func(name string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: args}
	}
	shell := func(name, script string) corev1.Container {
		c := agnhost(name)
		c.Command = []string{"/bin/bash", "-c", script}
		return c
	}
	labels := func(app string) map[string]string { return map[string]string{"app": app} }
	zero := ptr.To[int64](0)

	// A pod with an init container writing to a shared emptyDir, a web
	// container with a readiness probe and a sidecar.
	web := agnhost("web", "netexec", "--http-port=8080")
	web.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
		Port: intOrString(8080)}}, PeriodSeconds: 1}
	web.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	side := shell("sidecar", "sleep infinity")
	side.VolumeMounts = web.VolumeMounts
	initC := shell("init", "echo initialized by $(hostname) > /work/ready")
	initC.VolumeMounts = web.VolumeMounts
	multi := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "multi", Labels: labels("multi")},
		Spec: corev1.PodSpec{
			InitContainers:                []corev1.Container{initC},
			Containers:                    []corev1.Container{web, side},
			Volumes:                       []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			TerminationGracePeriodSeconds: zero,
		},
	}
	// A container whose liveness probe starts failing after a few seconds.
	flaky := shell("flaky", "touch /tmp/alive; sleep 4; rm /tmp/alive; sleep infinity")
	flaky.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/alive"}}},
		PeriodSeconds: 1, FailureThreshold: 1}
	liveness := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "liveness"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{flaky}, TerminationGracePeriodSeconds: zero},
	}
	// A container that records SIGTERM in its termination message.
	graceful := shell("graceful", `trap 'echo got SIGTERM > /dev/termination-log; exit 0' TERM; while true; do sleep 0.2; done`)
	gracefulPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "graceful"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{graceful}, TerminationGracePeriodSeconds: ptr.To[int64](30)},
	}
	for _, p := range []*corev1.Pod{multi, liveness, gracefulPod} {
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{shell("work", "echo job done on $(hostname)")}}},
		},
	}
	if _, err := e.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels("ds")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels("ds")},
				Spec: corev1.PodSpec{Containers: []corev1.Container{agnhost("pause", "pause")}, TerminationGracePeriodSeconds: zero}},
		},
	}
	if _, err := e.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	headless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sts"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels("sts"),
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
	if _, err := e.Client.CoreV1().Services(ns).Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stsWeb := agnhost("web", "netexec", "--http-port=8080")
	stsWeb.ReadinessProbe = web.ReadinessProbe
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sts"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](2),
			ServiceName: "sts",
			Selector:    &metav1.LabelSelector{MatchLabels: labels("sts")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels("sts")},
				Spec: corev1.PodSpec{Containers: []corev1.Container{stsWeb}, TerminationGracePeriodSeconds: zero}},
		},
	}
	if _, err := e.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("an init container runs to completion before the pod's containers, which share its volume", func(t *testing.T) {
		pods, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"multi"})
		if err != nil {
			t.Fatal(err)
		}
		p := pods["multi"]
		st := p.Status.InitContainerStatuses
		if len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
			t.Fatalf("init container should have terminated with exit code 0: %+v", st)
		}
		if len(p.Status.ContainerStatuses) != 2 {
			t.Fatalf("want 2 containers, got %+v", p.Status.ContainerStatuses)
		}
		for _, c := range []string{"web", "sidecar"} {
			out, _, err := e.Kubectl(ctx, "exec", "-n", ns, "multi", "-c", c, "--", "cat", "/work/ready")
			if err != nil || !strings.Contains(out, "initialized by multi") {
				t.Errorf("container %s should read the init container's file: %q, %v", c, out, err)
			}
		}
		// Containers of a pod share its network: the sidecar reaches the web
		// container on localhost.
		if out, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "multi", "-c", "sidecar", "--",
			"curl", "-s", "--max-time", "2", "http://127.0.0.1:8080/hostname"); err != nil || strings.TrimSpace(out) != "multi" {
			t.Errorf("sidecar should reach netexec on localhost and get the pod's hostname: %q %s %v", out, stderr, err)
		}
	})

	t.Run("a failing liveness probe makes kubelet restart the container", func(t *testing.T) {
		labtest.WaitFor(t, ctx, "pod liveness restarted", func() error {
			p, err := e.Client.CoreV1().Pods(ns).Get(ctx, "liveness", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.RestartCount > 0 {
					return nil
				}
			}
			return fmt.Errorf("no restart yet: %+v", p.Status.ContainerStatuses)
		})
	})

	t.Run("a Job runs its pods to completion", func(t *testing.T) {
		labtest.WaitFor(t, ctx, "job complete", func() error {
			j, err := e.Client.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Status.Succeeded != 2 {
				return fmt.Errorf("succeeded %d/2, failed %d", j.Status.Succeeded, j.Status.Failed)
			}
			return nil
		})
		out, stderr, err := e.Kubectl(ctx, "logs", "-n", ns, "job/job")
		if err != nil || !strings.Contains(out, "job done on job-") {
			t.Errorf("kubectl logs job/job should show the job's output: %q %s %v", out, stderr, err)
		}
	})

	t.Run("a DaemonSet runs one pod on every node", func(t *testing.T) {
		labtest.WaitFor(t, ctx, "daemonset ready on every node", func() error {
			d, err := e.Client.AppsV1().DaemonSets(ns).Get(ctx, "ds", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.DesiredNumberScheduled != int32(e.Opts.Nodes) || d.Status.NumberReady != int32(e.Opts.Nodes) {
				return fmt.Errorf("desired %d, ready %d, want %d", d.Status.DesiredNumberScheduled, d.Status.NumberReady, e.Opts.Nodes)
			}
			return nil
		})
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=ds"})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			nodes[p.Spec.NodeName] = true
		}
		if len(nodes) != e.Opts.Nodes {
			t.Errorf("DaemonSet pods should be on %d distinct nodes, are on %v", e.Opts.Nodes, nodes)
		}
	})

	t.Run("a StatefulSet starts its pods in order with stable names", func(t *testing.T) {
		labtest.WaitFor(t, ctx, "statefulset ready", func() error {
			s, err := e.Client.AppsV1().StatefulSets(ns).Get(ctx, "sts", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Status.ReadyReplicas != 2 {
				return fmt.Errorf("%d/2 ready", s.Status.ReadyReplicas)
			}
			return nil
		})
		p0, err := e.Client.CoreV1().Pods(ns).Get(ctx, "sts-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p1, err := e.Client.CoreV1().Pods(ns).Get(ctx, "sts-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// OrderedReady: sts-1 is created only once sts-0 is Ready.
		if ready := readySince(p0); ready.IsZero() || p1.CreationTimestamp.Time.Before(ready.Truncate(time.Second)) {
			t.Errorf("sts-1 (created %s) should be created after sts-0 was Ready (%s)", p1.CreationTimestamp, ready)
		}
		if out, _, err := e.Kubectl(ctx, "exec", "-n", ns, "sts-1", "--", "hostname"); err != nil || strings.TrimSpace(out) != "sts-1" {
			t.Errorf("sts-1's hostname should be its stable name: %q %v", out, err)
		}
	})

	t.Run("a deleted pod's container gets SIGTERM and its handler runs before it is killed", func(t *testing.T) {
		if _, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"graceful"}); err != nil {
			t.Fatal(err)
		}
		w, err := e.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=graceful"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := e.Client.CoreV1().Pods(ns).Delete(ctx, "graceful", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// kubelet reports the container's end in the pod status before the
		// pod object goes: its termination message is the trap's output.
		var msg string
		var exit int32 = -1
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Terminated != nil {
					msg, exit = c.State.Terminated.Message, c.State.Terminated.ExitCode
				}
			}
			if exit >= 0 {
				break
			}
		}
		if strings.TrimSpace(msg) != "got SIGTERM" || exit != 0 {
			t.Errorf("container should have handled SIGTERM and exited 0: message %q, exit code %d", msg, exit)
		}
	})
}

// readySince is when the pod last became Ready, zero if it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }
