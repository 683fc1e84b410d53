// Package monitor keeps antrea-controller's AntreaControllerInfo
// (crd.antrea.io/v1beta1, named antrea-controller): version, Pod, Node and
// Service, the computed policy counts, the number of connected agents and
// the ControllerHealthy condition, whose lastHeartbeatTime every refresh
// (60 s) moves. It also deletes the AntreaAgentInfos of Nodes that no longer
// exist (their agent cannot), as upstream's controller does.
package monitor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/version"
)

// Name is the AntreaControllerInfo's name, as upstream's.
const Name = "antrea-controller"

// DefaultInterval is the heartbeat period.
const DefaultInterval = 60 * time.Second

// Config is what the controller knows of itself.
type Config struct {
	PodName, PodNamespace, NodeName string
	// ServiceNamespace/ServiceName: the controlplane API's Service.
	ServiceNamespace, ServiceName string
	APIPort                       int
	// Interval between refreshes; 0 means DefaultInterval.
	Interval time.Duration
}

// Counts are read at every refresh.
type Counts struct {
	NetworkPolicies, AddressGroups, AppliedToGroups int
	// ConnectedAgents: agents watching the computed NetworkPolicies.
	ConnectedAgents int
}

// Monitor refreshes the AntreaControllerInfo.
type Monitor struct {
	client versioned.Interface
	kube   kubernetes.Interface
	cfg    Config
	counts func() Counts
}

// New returns the controller's monitor; kube (may be nil) finds the Nodes
// whose AntreaAgentInfo is to be removed.
func New(client versioned.Interface, kube kubernetes.Interface, cfg Config, counts func() Counts) *Monitor {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	return &Monitor{client: client, kube: kube, cfg: cfg, counts: counts}
}

// Run refreshes now and every interval until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Cannot refresh the AntreaControllerInfo", "name", Name)
		}
		if err := m.RemoveStaleAgentInfos(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Cannot remove the AntreaAgentInfos of deleted Nodes")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Monitor) build() *crdv1beta1.AntreaControllerInfo {
	n := m.counts()
	info := &crdv1beta1.AntreaControllerInfo{
		ObjectMeta: metav1.ObjectMeta{Name: Name},
		Version:    version.Version,
		NetworkPolicyControllerInfo: crdv1beta1.NetworkPolicyControllerInfo{NetworkPolicyNum: int32(n.NetworkPolicies),
			AddressGroupNum: int32(n.AddressGroups), AppliedToGroupNum: int32(n.AppliedToGroups)},
		ConnectedAgentNum: int32(n.ConnectedAgents),
		ControllerConditions: []crdv1beta1.ControllerCondition{{Type: crdv1beta1.ControllerHealthy,
			Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		APIPort: m.cfg.APIPort,
	}
	if m.cfg.PodName != "" {
		info.PodRef = corev1.ObjectReference{Kind: "Pod", Namespace: m.cfg.PodNamespace, Name: m.cfg.PodName}
	}
	if m.cfg.NodeName != "" {
		info.NodeRef = corev1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName}
	}
	if m.cfg.ServiceName != "" {
		info.ServiceRef = corev1.ObjectReference{Kind: "Service", Namespace: m.cfg.ServiceNamespace, Name: m.cfg.ServiceName}
	}
	return info
}

// Sync writes a fresh AntreaControllerInfo: created if missing, else
// replaced.
func (m *Monitor) Sync(ctx context.Context) error {
	info := m.build()
	infos := m.client.CrdV1beta1().AntreaControllerInfos()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := infos.Get(ctx, Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = infos.Create(ctx, info, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		info.ObjectMeta = cur.ObjectMeta
		_, err = infos.Update(ctx, info, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("AntreaControllerInfo %s: %w", Name, err)
	}
	return nil
}

// RemoveStaleAgentInfos deletes the AntreaAgentInfos whose Node is gone.
func (m *Monitor) RemoveStaleAgentInfos(ctx context.Context) error {
	if m.kube == nil {
		return nil
	}
	infos, err := m.client.CrdV1beta1().AntreaAgentInfos().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, info := range infos.Items {
		node := info.NodeRef.Name
		if node == "" {
			node = info.Name
		}
		_, err := m.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			continue
		}
		err = m.client.CrdV1beta1().AntreaAgentInfos().Delete(ctx, info.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting AntreaAgentInfo %s of deleted Node %s: %w", info.Name, node, err)
		}
		klog.InfoS("Deleted the AntreaAgentInfo of a deleted Node", "name", info.Name, "node", node)
	}
	return nil
}
