package nodesim

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/testpod"
)

// probe is one port a test pod process must answer on before it is Ready.
type probe struct {
	protocol string
	port     string
}

// waitServing probes the ports on loopback from inside the pod netns until
// all answer or the timeout ends.
func waitServing(ctx context.Context, netns string, probes []probe, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for _, p := range probes {
		for {
			var res testpod.Result
			connect := func(ns.NetNS) error {
				var err error
				res, err = testpod.Connect(ctx, testpod.ConnectConfig{
					Protocol: p.protocol, To: net.JoinHostPort("127.0.0.1", p.port), Timeout: 200 * time.Millisecond,
				})
				return err
			}
			var err error
			if netns == "" {
				err = connect(nil)
			} else {
				// Sockets belong to the netns of the thread that creates them;
				// WithNetNSPath keeps this goroutine on that thread.
				err = ns.WithNetNSPath(netns, connect)
			}
			if err == nil && res.Verdict == testpod.Connected {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return true
}

// setCondition sets a pod condition, keeping its transition time when the
// status does not change.
func setCondition(status *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != s {
			c.LastTransitionTime = metav1.Now().Rfc3339Copy()
		}
		c.Status, c.Reason, c.Message = s, reason, msg
		return
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{
		Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.Now().Rfc3339Copy(),
	})
}

// updatePodStatus reports the sandbox's IPs and its containers' state.
func (sim *simulator) updatePodStatus(ctx context.Context, pod *corev1.Pod, st *podState) error {
	return sim.writeStatus(ctx, pod, func(pod *corev1.Pod) *corev1.PodStatus { return sim.runningStatus(pod, st) })
}

// runningStatus is the pod's status computed from its sandbox and processes.
func (sim *simulator) runningStatus(pod *corev1.Pod, st *podState) *corev1.PodStatus {
	status := pod.Status.DeepCopy()
	status.HostIP = sim.cfg.NodeIP.String()
	status.HostIPs = []corev1.HostIP{{IP: sim.cfg.NodeIP.String()}}
	status.PodIP = st.IPs[0]
	status.PodIPs = nil
	for _, ip := range st.IPs {
		status.PodIPs = append(status.PodIPs, corev1.PodIP{IP: ip})
	}
	if status.StartTime == nil {
		t := metav1.NewTime(st.Created).Rfc3339Copy()
		status.StartTime = &t
	}

	allReady, anyRunning, allExited, anyFailed := true, false, true, false
	var statuses []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		cs := st.container(c.Name)
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		if cs != nil {
			s.RestartCount = cs.RestartCount
			s.ContainerID = fmt.Sprintf("lab://%s-%s", st.SandboxID[:12], c.Name)
			if cs.LastExitCode != nil && !cs.LastExitAt.IsZero() {
				s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
					ExitCode: int32(*cs.LastExitCode), FinishedAt: metav1.NewTime(cs.LastExitAt).Rfc3339Copy(),
				}
			}
		}
		switch {
		case cs != nil && cs.PID > 0:
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt).Rfc3339Copy()}
			s.Ready, s.Started = cs.Ready, ptr.To(true)
			anyRunning, allExited = true, false
		case cs != nil && !cs.StartedAt.IsZero() && !restartWanted(pod.Spec.RestartPolicy, cs.LastExitCode):
			code := -1
			if cs.LastExitCode != nil {
				code = *cs.LastExitCode
			}
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(code),
				StartedAt: metav1.NewTime(cs.StartedAt).Rfc3339Copy(), FinishedAt: metav1.NewTime(cs.LastExitAt).Rfc3339Copy()}
			s.LastTerminationState = corev1.ContainerState{}
			s.Started = ptr.To(false)
			anyFailed = anyFailed || code != 0
		case cs != nil && !cs.StartedAt.IsZero():
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting the container process"}
			s.Started = ptr.To(false)
			allExited = false
		default:
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			allExited = false
		}
		allReady = allReady && s.Ready
		statuses = append(statuses, s)
	}
	status.ContainerStatuses = statuses

	switch {
	case allExited && anyFailed:
		status.Phase = corev1.PodFailed
	case allExited:
		status.Phase = corev1.PodSucceeded
	case anyRunning:
		status.Phase = corev1.PodRunning
	default:
		status.Phase = corev1.PodPending
	}
	setCondition(status, corev1.PodScheduled, corev1.ConditionTrue, "", "")
	setCondition(status, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
	setCondition(status, corev1.PodInitialized, corev1.ConditionTrue, "", "")
	if allReady {
		setCondition(status, corev1.ContainersReady, corev1.ConditionTrue, "", "")
		setCondition(status, corev1.PodReady, corev1.ConditionTrue, "", "")
	} else {
		setCondition(status, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers not ready")
		setCondition(status, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers not ready")
	}
	return status
}

// writeStatus updates the pod's status subresource to compute(pod) when that
// differs. On a conflict the cached pod was behind (e.g. our own annotation
// patch): the status is computed again from the latest pod, not overwritten
// with one computed from stale data.
func (sim *simulator) writeStatus(ctx context.Context, pod *corev1.Pod, compute func(*corev1.Pod) *corev1.PodStatus) error {
	for attempt := 0; ; attempt++ {
		status := compute(pod)
		if apiequality.Semantic.DeepEqual(&pod.Status, status) {
			return nil
		}
		p := pod.DeepCopy()
		p.Status = *status
		_, err := sim.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 2 {
			return fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		latest, err := sim.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if latest.UID != pod.UID {
			return fmt.Errorf("update status of pod %s/%s: the pod was replaced", pod.Namespace, pod.Name)
		}
		pod = latest
	}
}
