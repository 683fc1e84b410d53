package nodesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// stopGrace is how long a pod's processes get between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// sync makes one pod's sandbox and processes match the pod object: it is
// idempotent, so it runs again after any failure or event.
func (sim *simulator) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	sim.mu.Lock()
	// A copy: the sync changes it freely and publishes it with saveState.
	st := sim.states[key].deepCopy()
	sim.mu.Unlock()

	pod, err := sim.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		if st != nil {
			klog.InfoS("Pod is gone, tearing down its sandbox", "pod", key)
			return sim.teardown(ctx, st)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if st != nil && st.UID != string(pod.UID) {
		// A new pod with the same name: the old sandbox belongs to the old pod.
		klog.InfoS("Pod was recreated, tearing down the old sandbox", "pod", key, "oldUID", st.UID)
		if err := sim.teardown(ctx, st); err != nil {
			return err
		}
		st = nil
	}
	if pod.DeletionTimestamp != nil {
		if st != nil {
			sim.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping the pod's processes and tearing down its sandbox")
		}
		return sim.finishDeletion(ctx, pod, st)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// As kubelet stops a finished pod's sandbox: its IP goes back to the
		// pool, while its status keeps the IP it had.
		if st != nil {
			klog.InfoS("Pod finished, tearing down its sandbox", "pod", key, "phase", pod.Status.Phase)
			return sim.teardown(ctx, st)
		}
		return nil
	}

	updated, st, err := sim.ensureSandbox(ctx, pod, st)
	if err != nil {
		sim.reportSandboxFailure(ctx, pod, err)
		return err
	}
	pod = updated
	retryAfter, err := sim.ensureProcesses(ctx, pod, st)
	if err != nil {
		return err
	}
	if err := sim.updatePodStatus(ctx, pod, st); err != nil {
		return err
	}
	if retryAfter > 0 {
		sim.queue.AddAfter(key, retryAfter)
	}
	return nil
}

// finishDeletion tears the sandbox down and then deletes the pod object for
// good (grace period 0), which is how kubelet completes a graceful deletion.
func (sim *simulator) finishDeletion(ctx context.Context, pod *corev1.Pod, st *podState) error {
	key := pod.Namespace + "/" + pod.Name
	if st != nil {
		if err := sim.teardown(ctx, st); err != nil {
			return err
		}
	}
	uid := pod.UID
	err := sim.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	klog.InfoS("Pod deleted", "pod", key)
	return nil
}

// teardown stops the processes, runs CNI DEL, removes the netns and forgets
// the pod, in the order containerd does (DEL while the netns still exists).
func (sim *simulator) teardown(ctx context.Context, st *podState) error {
	for i := range st.Containers {
		c := &st.Containers[i]
		if err := stopProcess(ctx, c.PID, c.StartTicks, stopGrace); err != nil {
			return fmt.Errorf("stop container %s of pod %s: %w", c.Name, st.key(), err)
		}
	}
	if err := sim.cniDel(ctx, st); err != nil {
		if len(st.IPs) > 0 {
			return err
		}
		// The ADD never completed, so there may be nothing to undo, and a
		// configuration whose ADD fails often fails DEL the same way (a
		// missing plugin): insisting would block the pod's next sandbox.
		// containerd likewise moves on to a new sandbox.
		klog.ErrorS(err, "CNI DEL of an incomplete sandbox failed; moving on", "pod", st.key(), "sandbox", st.SandboxID)
	}
	if err := deleteNetNS(ctx, st.NetNS); err != nil {
		return fmt.Errorf("pod %s: %w", st.key(), err)
	}
	if err := removeState(sim.cfg.StateDir, st); err != nil {
		return err
	}
	sim.mu.Lock()
	if cur := sim.states[st.key()]; cur != nil && cur.UID == st.UID {
		delete(sim.states, st.key())
	}
	sim.mu.Unlock()
	klog.InfoS("Pod sandbox torn down", "pod", st.key(), "netns", st.NetNS, "sandbox", st.SandboxID)
	return nil
}

// saveState persists the state and makes it the pod's current one.
func (sim *simulator) saveState(st *podState) error {
	if err := saveState(sim.cfg.StateDir, st); err != nil {
		return err
	}
	sim.mu.Lock()
	sim.states[st.key()] = st
	sim.mu.Unlock()
	return nil
}

// ensureSandbox returns a sandbox with network for the pod: the recorded one
// when its netns still exists and its ADD completed (adoption), else a new one.
func (sim *simulator) ensureSandbox(ctx context.Context, pod *corev1.Pod, st *podState) (*corev1.Pod, *podState, error) {
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.HostNetwork {
		// As kubelet: no netns and no CNI; the pod shares the node's network.
		if st == nil {
			id, err := newSandboxID()
			if err != nil {
				return nil, nil, err
			}
			st = &podState{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), SandboxID: id,
				IPs: []string{sim.cfg.NodeIP.String()}, Created: time.Now()}
			if err := sim.saveState(st); err != nil {
				return nil, nil, err
			}
		}
		return pod, st, nil
	}
	if st != nil && len(st.IPs) > 0 && netnsExists(st.NetNS) {
		pod, err := sim.annotateNetNS(ctx, pod, st.NetNS)
		return pod, st, err
	}
	if st != nil {
		// Half-made (ADD did not finish) or its netns vanished: start over.
		klog.InfoS("Sandbox is incomplete, recreating it", "pod", key, "netns", st.NetNS)
		if err := sim.teardown(ctx, st); err != nil {
			return nil, nil, err
		}
	}
	list, err := loadCNIConfList(sim.cfg.CNIConfDir)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s: %w", key, err)
	}
	id, err := newSandboxID()
	if err != nil {
		return nil, nil, err
	}
	st = &podState{
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		SandboxID: id,
		NetNS:     podNetNSName(sim.cfg.PodNetNSPrefix, string(pod.UID)),
		ConfList:  json.RawMessage(list.Bytes),
	}
	// A netns of that name can only be a leftover of this very pod.
	if err := deleteNetNS(ctx, st.NetNS); err != nil {
		return nil, nil, fmt.Errorf("pod %s: %w", key, err)
	}
	// Record first, so that a crash during ADD leaves enough to run DEL.
	if err := sim.saveState(st); err != nil {
		return nil, nil, err
	}
	if err := createNetNS(ctx, st.NetNS); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("pod %s: %w", key, err), sim.teardown(ctx, st))
	}
	pod, err = sim.annotateNetNS(ctx, pod, st.NetNS)
	if err != nil {
		return nil, nil, errors.Join(err, sim.teardown(ctx, st))
	}
	ips, err := sim.cniAdd(ctx, st, list)
	if err != nil {
		// As containerd: a failed ADD is undone by DEL, the sandbox removed.
		return nil, nil, errors.Join(err, sim.teardown(ctx, st))
	}
	st.IPs = ips
	st.Created = time.Now()
	if err := sim.saveState(st); err != nil {
		return nil, nil, err
	}
	klog.InfoS("Pod sandbox ready", "pod", key, "netns", st.NetNS, "ips", ips, "network", list.Name)
	return pod, st, nil
}

// annotateNetNS records the netns name on the pod and returns the updated
// pod, so that the status update that follows does not conflict with it.
func (sim *simulator) annotateNetNS(ctx context.Context, pod *corev1.Pod, netns string) (*corev1.Pod, error) {
	if pod.Annotations[NetNSAnnotation] == netns {
		return pod, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{NetNSAnnotation: netns}}})
	if err != nil {
		return nil, err
	}
	// Through the status subresource: the NodeRestriction admission plugin
	// forbids a node to update a pod itself, but lets it patch the status of
	// its own pods, and the status strategy keeps metadata annotations.
	updated, err := sim.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("annotate pod %s/%s with its netns: %w", pod.Namespace, pod.Name, err)
	}
	return updated, nil
}

// reportSandboxFailure shows a failed sandbox in the pod's status and as an
// Event, with the reason kubelet uses.
func (sim *simulator) reportSandboxFailure(ctx context.Context, pod *corev1.Pod, cause error) {
	sim.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", cause)
	err := sim.writeStatus(ctx, pod, func(pod *corev1.Pod) *corev1.PodStatus { return sim.sandboxFailureStatus(pod, cause) })
	if err != nil {
		klog.ErrorS(err, "Could not report sandbox failure", "pod", klog.KObj(pod))
	}
}

// sandboxFailureStatus is a Pending status that carries the failure, as
// kubelet shows it.
func (sim *simulator) sandboxFailureStatus(pod *corev1.Pod, cause error) *corev1.PodStatus {
	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodPending
	status.HostIP = sim.cfg.NodeIP.String()
	status.HostIPs = []corev1.HostIP{{IP: sim.cfg.NodeIP.String()}}
	msg := "Failed to create pod sandbox: " + cause.Error()
	setCondition(status, corev1.PodScheduled, corev1.ConditionTrue, "", "")
	setCondition(status, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "FailedCreatePodSandBox", msg)
	setCondition(status, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", msg)
	setCondition(status, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", msg)
	status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: msg}},
		})
	}
	return status
}

// ensureProcesses starts every container process that does not run. It
// returns how long to wait before a crashed container may be restarted.
func (sim *simulator) ensureProcesses(ctx context.Context, pod *corev1.Pod, st *podState) (time.Duration, error) {
	var retryAfter time.Duration
	changed := false
	for _, c := range pod.Spec.Containers {
		cs := st.container(c.Name)
		if cs == nil {
			st.Containers = append(st.Containers, containerState{Name: c.Name})
			cs = &st.Containers[len(st.Containers)-1]
			changed = true
		}
		if alive(cs.PID, cs.StartTicks) {
			continue
		}
		if cs.PID > 0 {
			// It ran and is gone. Only our own children have an exit code;
			// an adopted process that died is counted as failed.
			sim.mu.Lock()
			rec, ok := sim.exits[cs.PID]
			delete(sim.exits, cs.PID)
			sim.mu.Unlock()
			if ok {
				cs.LastExitCode, cs.LastExitAt = ptr.To(rec.code), rec.at
			} else {
				cs.LastExitCode, cs.LastExitAt = nil, time.Now()
			}
			klog.InfoS("Container process is gone", "pod", st.key(), "container", c.Name, "pid", cs.PID, "exitCode", cs.LastExitCode)
			cs.PID, cs.StartTicks, cs.Ready = 0, 0, false
			changed = true
			if !restartWanted(pod.Spec.RestartPolicy, cs.LastExitCode) {
				continue
			}
		} else if !cs.StartedAt.IsZero() && !restartWanted(pod.Spec.RestartPolicy, cs.LastExitCode) {
			continue
		}
		if !cs.StartedAt.IsZero() {
			// Crash loop backoff, as kubelet: 1s doubling up to 1 min.
			backoff := min(time.Second<<min(cs.RestartCount, 6), time.Minute)
			if wait := time.Until(cs.LastExitAt.Add(backoff)); wait > 0 {
				retryAfter = wait
				continue
			}
			cs.RestartCount++
		}
		changed = true
		if err := sim.startContainer(ctx, pod, st, c, cs); err != nil {
			// As kubelet: a process that cannot start counts as one that
			// exited at once (exit code 128), and is retried with backoff.
			klog.ErrorS(err, "Container process did not start", "pod", st.key(), "container", c.Name)
			sim.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: container %s: %v", c.Name, err)
			now := time.Now()
			cs.PID, cs.StartTicks, cs.Ready = 0, 0, false
			cs.StartedAt, cs.LastExitAt, cs.LastExitCode = now, now, ptr.To(128)
			if restartWanted(pod.Spec.RestartPolicy, cs.LastExitCode) {
				retryAfter = max(retryAfter, min(time.Second<<min(cs.RestartCount, 6), time.Minute))
			}
		}
	}
	if changed {
		if err := sim.saveState(st); err != nil {
			return 0, err
		}
	}
	return retryAfter, nil
}

func restartWanted(policy corev1.RestartPolicy, lastExit *int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return lastExit == nil || *lastExit != 0
	}
	return true
}

// containerProcess maps a container to a process: its command from the
// host's filesystem, or the test pod program on its declared ports.
func (sim *simulator) containerProcess(pod *corev1.Pod, st *podState, c corev1.Container) (processSpec, []probe) {
	spec := processSpec{
		Dir:     "/",
		LogPath: filepath.Join(sim.cfg.PodLogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, c.Name)),
		Env: []string{
			"PATH=" + sim.podPATH(),
			"HOME=/",
			"HOSTNAME=" + pod.Name,
			"POD_NAME=" + pod.Name,
			"POD_NAMESPACE=" + pod.Namespace,
			"POD_IP=" + st.IPs[0],
			"NODE_NAME=" + sim.cfg.NodeName,
		},
	}
	if c.WorkingDir != "" {
		spec.Dir = c.WorkingDir
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			spec.Env = append(spec.Env, e.Name+"="+e.Value)
		}
	}
	if len(c.Command) > 0 {
		spec.Path = lookPath(c.Command[0], sim.podPATH())
		spec.Args = append(append([]string{}, c.Command[1:]...), c.Args...)
		return spec, nil
	}
	var tcp, udp []string
	var probes []probe
	for _, p := range c.Ports {
		port := strconv.Itoa(int(p.ContainerPort))
		switch p.Protocol {
		case corev1.ProtocolUDP:
			udp = append(udp, port)
			probes = append(probes, probe{"udp", port})
		case corev1.ProtocolTCP, "":
			tcp = append(tcp, port)
			probes = append(probes, probe{"tcp", port})
		}
	}
	if len(tcp)+len(udp) == 0 {
		tcp, udp = []string{"80", "81"}, []string{"80", "81"}
		probes = []probe{{"tcp", "80"}, {"tcp", "81"}, {"udp", "80"}, {"udp", "81"}}
	}
	spec.Path = sim.cfg.TestPodBinary
	spec.Args = []string{"serve", "--name", pod.Name}
	if len(tcp) > 0 {
		spec.Args = append(spec.Args, "--tcp", strings.Join(tcp, ","))
	}
	if len(udp) > 0 {
		spec.Args = append(spec.Args, "--udp", strings.Join(udp, ","))
	}
	return spec, probes
}

func (sim *simulator) startContainer(ctx context.Context, pod *corev1.Pod, st *podState, c corev1.Container, cs *containerState) error {
	spec, probes := sim.containerProcess(pod, st, c)
	key := st.key()
	pid, ticks, err := startInNetNS(st.netnsPath(), spec, func(pid, code int) {
		sim.mu.Lock()
		sim.exits[pid] = exitRecord{code: code, at: time.Now()}
		sim.mu.Unlock()
		sim.queue.Add(key)
	})
	if err != nil {
		return fmt.Errorf("pod %s: %w", key, err)
	}
	cs.PID, cs.StartTicks, cs.StartedAt, cs.Ready = pid, ticks, time.Now(), false
	// Record the PID before anything else can fail: an unrecorded process
	// would outlive the pod and escape Cleanup.
	if err := sim.saveState(st); err != nil {
		return err
	}
	klog.InfoS("Started container process", "pod", key, "container", c.Name, "pid", pid, "command", append([]string{spec.Path}, spec.Args...), "log", spec.LogPath)
	sim.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s: %s (pid %d)", c.Name, strings.Join(append([]string{spec.Path}, spec.Args...), " "), pid)
	// Ready once it answers on every port, so a test that waits for Ready
	// does not race the server's bind.
	cs.Ready = waitServing(ctx, st.netnsPath(), probes, 5*time.Second)
	if !cs.Ready {
		klog.InfoS("Container process does not answer yet", "pod", key, "container", c.Name, "pid", pid)
	}
	return nil
}

// podPATH is the PATH of pod processes: the simulator's, with the directory of
// the test pod program first, so a command can name antrea-testpod (and the
// project's other binaries) without a path.
func (sim *simulator) podPATH() string {
	return filepath.Dir(sim.cfg.TestPodBinary) + string(filepath.ListSeparator) + os.Getenv("PATH")
}

// lookPath resolves a command name against path, as a shell would; names
// with a slash, and names not found, are returned unchanged (the start then
// fails with a clear error).
func lookPath(name, path string) string {
	if strings.Contains(name, "/") {
		return name
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}
