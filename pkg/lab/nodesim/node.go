package nodesim

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/version"
)

// nodeLeaseNamespace holds the node heartbeat Leases (kubelet's node lease).
const nodeLeaseNamespace = "kube-node-lease"

// The capacity a simulated node reports: enough for the scheduler to place
// the lab's pods, which request nothing real.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("8"),
	corev1.ResourceMemory:           resource.MustParse("16Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

// registerNode creates the Node (or adopts an existing one) and sets its
// addresses, capacity and conditions.
func (sim *simulator) registerNode(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: sim.cfg.NodeName,
			Labels: map[string]string{
				corev1.LabelHostname:   sim.cfg.NodeName,
				corev1.LabelOSStable:   runtime.GOOS,
				corev1.LabelArchStable: runtime.GOARCH,
			},
		},
	}
	_, err := sim.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", sim.cfg.NodeName, err)
	}
	if err == nil {
		klog.InfoS("Registered node", "node", sim.cfg.NodeName, "internalIP", sim.cfg.NodeIP)
	} else {
		klog.InfoS("Node already registered, taking it over", "node", sim.cfg.NodeName)
	}
	return sim.updateNodeStatus(ctx)
}

// networkReady reports, like a container runtime, whether a CNI configuration
// is present: until it is, the node is NotReady and gets no pods.
func (sim *simulator) networkReady(ctx context.Context) (bool, string) {
	list, err := loadCNIConfList(sim.cfg.CNIConfDir)
	if err != nil {
		return false, "container runtime network not ready: " + err.Error()
	}
	// CNI 1.1 STATUS (libcni skips older versions), as containerd asks it:
	// the plugin says whether it can take ADDs now.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sim.cni.GetStatusNetworkList(ctx, list); err != nil {
		return false, fmt.Sprintf("container runtime network not ready: CNI STATUS of %s: %v", list.Name, err)
	}
	return true, "node simulator is posting ready status"
}

// updateNodeStatus writes the node's status with a fresh heartbeat.
func (sim *simulator) updateNodeStatus(ctx context.Context) error {
	ready, msg := sim.networkReady(ctx)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := sim.client.CoreV1().Nodes().Get(ctx, sim.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		readyStatus, reason := corev1.ConditionTrue, "KubeletReady"
		if !ready {
			readyStatus, reason = corev1.ConditionFalse, "KubeletNotReady"
		}
		want := []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "simulated node"},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "simulated node"},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "simulated node"},
			{Type: corev1.NodeReady, Status: readyStatus, Reason: reason, Message: msg},
		}
		for i := range want {
			want[i].LastHeartbeatTime = now
			want[i].LastTransitionTime = now
			for _, old := range node.Status.Conditions {
				if old.Type == want[i].Type && old.Status == want[i].Status {
					want[i].LastTransitionTime = old.LastTransitionTime
				}
			}
		}
		node.Status.Conditions = want
		hostname, _ := os.Hostname()
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: sim.cfg.NodeIP.String()},
			{Type: corev1.NodeHostName, Address: sim.cfg.NodeName},
		}
		node.Status.Capacity = nodeCapacity.DeepCopy()
		node.Status.Allocatable = nodeCapacity.DeepCopy()
		node.Status.NodeInfo = corev1.NodeSystemInfo{
			MachineID:               hostname,
			KernelVersion:           kernelVersion(),
			OSImage:                 "antrea-lab node simulator",
			ContainerRuntimeVersion: "antrea-lab://" + version.Version,
			KubeletVersion:          version.Version,
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		}
		_, err = sim.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", sim.cfg.NodeName, err)
	}
	sim.lastNetworkReady.Store(ready)
	return nil
}

func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return string(trimNewline(b))
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// heartbeat renews the node Lease every quarter of its duration and rewrites
// the status every StatusInterval, or at once when network readiness changes.
func (sim *simulator) heartbeat(ctx context.Context) {
	renew := sim.cfg.LeaseDuration / 4
	var lastRenew time.Time
	lastStatus := time.Now()
	// The tick is short so that a change of network readiness shows soon;
	// the Lease and the status are written on their own periods.
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if time.Since(lastRenew) >= renew {
			if err := sim.renewLease(ctx); err != nil {
				klog.ErrorS(err, "Node lease renewal failed", "node", sim.cfg.NodeName)
			} else {
				lastRenew = time.Now()
			}
		}
		ready, _ := sim.networkReady(ctx)
		if time.Since(lastStatus) >= sim.cfg.StatusInterval || ready != sim.lastNetworkReady.Load() {
			if err := sim.updateNodeStatus(ctx); err != nil {
				klog.ErrorS(err, "Node status heartbeat failed", "node", sim.cfg.NodeName)
				return
			}
			lastStatus = time.Now()
		}
	}, min(renew, 2*time.Second))
}

// renewLease creates or renews the node's Lease in kube-node-lease, owned by
// the Node so that it goes away with it.
func (sim *simulator) renewLease(ctx context.Context) error {
	leases := sim.client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, sim.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := sim.client.CoreV1().Nodes().Get(ctx, sim.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("lease of node %s: %w", sim.cfg.NodeName, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      sim.cfg.NodeName,
				Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(sim.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(int32(sim.cfg.LeaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create lease of node %s: %w", sim.cfg.NodeName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("lease of node %s: %w", sim.cfg.NodeName, err)
	}
	lease.Spec.HolderIdentity = ptr.To(sim.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(sim.cfg.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew lease of node %s: %w", sim.cfg.NodeName, err)
	}
	return nil
}
