// Package monitor keeps the agent's AntreaAgentInfo (crd.antrea.io/v1beta1,
// named after its Node): version, Pod and Node, the Node's Pod CIDRs, the
// OVS version (ovs_version of OVSDB's Open_vSwitch table), the bridge's
// flow count per table, the local Pod count, the Node's slice of the
// computed policies, and four conditions checked at every refresh:
//
//	AgentHealthy            the agent runs (always True while it writes)
//	ControllerConnectionUp  every policy watch of the controlplane API is open
//	OVSDBConnectionUp       ovsdb-server answered
//	OpenflowConnectionUp    the bridge's OpenFlow channel answered a table-stats request
//
// Every refresh (60 s) sets each condition's lastHeartbeatTime: the
// heartbeat. A change of the local pod count brings the next refresh
// forward (at most one per 10 s). While a condition is not True the monitor checks again every
// 10 s, so a connection that comes back (the controller's watches re-opened
// after a restart) shows within seconds rather than at the next heartbeat. An AntreaAgentInfo whose heartbeat is older than a few
// intervals belongs to an agent that stopped reporting (kubectl get
// antreaagentinfos shows its age in LAST HEARTBEAT).
package monitor

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/version"
)

// DefaultInterval is the heartbeat period, as upstream's.
const DefaultInterval = 60 * time.Second

// DefaultRecheckInterval is the refresh period while a condition is not True.
const DefaultRecheckInterval = 10 * time.Second

// DefaultPodCountCheck is how often the monitor reads the local pod count
// (memory only) between refreshes; DefaultMinRefreshGap is how soon after a
// refresh a moved count may bring the next one forward.
const (
	DefaultPodCountCheck = 2 * time.Second
	DefaultMinRefreshGap = 10 * time.Second
)

// probeTimeout bounds each condition's check.
const probeTimeout = 5 * time.Second

// probeTries checks in a row, probeRetryPause apart, must fail for a
// condition to be False.
const (
	probeTries      = 3
	probeRetryPause = time.Second
)

// Config is what the agent knows of itself at start.
type Config struct {
	NodeName     string
	PodName      string
	PodNamespace string
	NodeSubnets  []string
	BridgeName   string
	APIPort      int
	// Interval between refreshes; 0 means DefaultInterval.
	Interval time.Duration
	// RecheckInterval between refreshes while a condition is not True
	// (bounded by Interval); 0 means DefaultRecheckInterval.
	RecheckInterval time.Duration
	// PodCountCheck and MinRefreshGap: a local pod count that differs from
	// the one last written refreshes early, at most once per MinRefreshGap
	// (a write per Node per gap under constant churn, never more); 0 means
	// DefaultPodCountCheck and DefaultMinRefreshGap.
	PodCountCheck, MinRefreshGap time.Duration
}

// PolicyCounts are the Node's slice of the computed policies.
type PolicyCounts struct {
	NetworkPolicies, AddressGroups, AppliedToGroups int
}

// Sources are read at every refresh. A nil check leaves its condition
// Unknown.
type Sources struct {
	// OVSVersion reads ovs_version from OVSDB (an error: OVSDB is down).
	OVSVersion func(ctx context.Context) (string, error)
	// FlowTable reads the flow count per table (an error: OpenFlow is down).
	FlowTable func(ctx context.Context) (map[string]int32, error)
	// ControllerUp asks the controlplane API something.
	ControllerUp func(ctx context.Context) error
	LocalPods    func() int
	Policies     func() PolicyCounts
}

// Monitor refreshes one AntreaAgentInfo.
type Monitor struct {
	client versioned.Interface
	cfg    Config
	src    Sources
	now    func() time.Time

	mu   sync.Mutex
	last *crdv1beta1.AntreaAgentInfo
}

// New returns a monitor of the agent described by cfg.
func New(client versioned.Interface, cfg Config, src Sources) *Monitor {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RecheckInterval == 0 {
		cfg.RecheckInterval = DefaultRecheckInterval
	}
	cfg.RecheckInterval = min(cfg.RecheckInterval, cfg.Interval)
	if cfg.PodCountCheck == 0 {
		cfg.PodCountCheck = DefaultPodCountCheck
	}
	if cfg.MinRefreshGap == 0 {
		cfg.MinRefreshGap = DefaultMinRefreshGap
	}
	return &Monitor{client: client, cfg: cfg, src: src, now: time.Now}
}

// Run refreshes the AntreaAgentInfo now and every interval (every recheck
// interval while a condition is not True) until ctx ends. A pod created or
// deleted on the Node brings the next refresh forward (no sooner than
// MinRefreshGap after the last), so kubectl get antreaagentinfos counts the
// Node's pods within seconds, not at the next heartbeat.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTimer(m.cfg.Interval)
	defer t.Stop()
	podCheck := time.NewTicker(m.cfg.PodCountCheck)
	defer podCheck.Stop()
	for {
		next := m.cfg.Interval
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Cannot refresh the AntreaAgentInfo", "name", m.cfg.NodeName)
		} else if down := m.conditionsNotTrue(); len(down) > 0 {
			klog.InfoS("AntreaAgentInfo has conditions not True; checking again soon", "conditions", down, "in", m.cfg.RecheckInterval)
			next = m.cfg.RecheckInterval
		}
		synced := m.now()
		t.Reset(next)
	wait:
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-podCheck.C:
			if m.now().Sub(synced) < m.cfg.MinRefreshGap || !m.podCountMoved() {
				goto wait
			}
			klog.V(2).InfoS("The local pod count moved; refreshing the AntreaAgentInfo early", "name", m.cfg.NodeName)
		}
	}
}

// podCountMoved tells whether the local pod count differs from the one in
// the last AntreaAgentInfo written.
func (m *Monitor) podCountMoved() bool {
	if m.src.LocalPods == nil {
		return false
	}
	n := int32(m.src.LocalPods())
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last != nil && m.last.LocalPodNum != n
}

// conditionsNotTrue names the conditions of the last AntreaAgentInfo written
// that are False (an Unknown one has no source to check again).
func (m *Monitor) conditionsNotTrue() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return nil
	}
	var down []string
	for _, c := range m.last.AgentConditions {
		if c.Status == corev1.ConditionFalse {
			down = append(down, string(c.Type))
		}
	}
	return down
}

// Info returns the last AntreaAgentInfo written (the agent API's /agentinfo).
func (m *Monitor) Info(context.Context) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return nil, fmt.Errorf("the AntreaAgentInfo of %s is not written yet", m.cfg.NodeName)
	}
	return m.last.DeepCopy(), nil
}

// condition checks one condition: True when check succeeds.
func condition(ctx context.Context, t crdv1beta1.AgentConditionType, now metav1.Time, check func(ctx context.Context) error) crdv1beta1.AgentCondition {
	c := crdv1beta1.AgentCondition{Type: t, Status: corev1.ConditionUnknown, LastHeartbeatTime: now}
	if check == nil {
		c.Reason = "NotChecked"
		return c
	}
	// One failed answer is not a connection down (kube-apiserver answers 503
	// for an aggregated API now and then, e.g. while it refreshes discovery):
	// the condition is False only when probeTries checks in a row fail.
	var err error
	for try := 0; try < probeTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(probeRetryPause):
			}
		}
		if err = probe(ctx, check); err == nil {
			c.Status = corev1.ConditionTrue
			return c
		}
	}
	c.Status, c.Reason, c.Message = corev1.ConditionFalse, string(t)[:len(t)-2]+"Down", err.Error()
	return c
}

// probe runs one check bounded by probeTimeout.
func probe(ctx context.Context, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return check(ctx)
}

// build reads the sources into a fresh AntreaAgentInfo.
func (m *Monitor) build(ctx context.Context) *crdv1beta1.AntreaAgentInfo {
	now := metav1.NewTime(m.now())
	info := &crdv1beta1.AntreaAgentInfo{
		ObjectMeta:  metav1.ObjectMeta{Name: m.cfg.NodeName},
		Version:     version.Version,
		NodeRef:     corev1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName},
		NodeSubnets: m.cfg.NodeSubnets,
		OVSInfo:     crdv1beta1.OVSInfo{BridgeName: m.cfg.BridgeName},
		APIPort:     m.cfg.APIPort,
	}
	if m.cfg.PodName != "" {
		info.PodRef = corev1.ObjectReference{Kind: "Pod", Namespace: m.cfg.PodNamespace, Name: m.cfg.PodName}
	}
	if m.src.LocalPods != nil {
		info.LocalPodNum = int32(m.src.LocalPods())
	}
	if m.src.Policies != nil {
		p := m.src.Policies()
		info.NetworkPolicyControllerInfo = crdv1beta1.NetworkPolicyControllerInfo{NetworkPolicyNum: int32(p.NetworkPolicies),
			AddressGroupNum: int32(p.AddressGroups), AppliedToGroupNum: int32(p.AppliedToGroups)}
	}
	healthy := crdv1beta1.AgentCondition{Type: crdv1beta1.AgentHealthy, Status: corev1.ConditionTrue, LastHeartbeatTime: now}
	var ovsdb, openflow func(ctx context.Context) error
	if m.src.OVSVersion != nil {
		ovsdb = func(ctx context.Context) error {
			v, err := m.src.OVSVersion(ctx)
			info.OVSInfo.Version = v
			return err
		}
	}
	if m.src.FlowTable != nil {
		openflow = func(ctx context.Context) error {
			t, err := m.src.FlowTable(ctx)
			info.OVSInfo.FlowTable = t
			return err
		}
	}
	info.AgentConditions = []crdv1beta1.AgentCondition{
		healthy,
		condition(ctx, crdv1beta1.ControllerConnectionUp, now, m.src.ControllerUp),
		condition(ctx, crdv1beta1.OVSDBConnectionUp, now, ovsdb),
		condition(ctx, crdv1beta1.OpenflowConnectionUp, now, openflow),
	}
	return info
}

// Sync writes a fresh AntreaAgentInfo: created if missing, else replaced.
func (m *Monitor) Sync(ctx context.Context) error {
	info := m.build(ctx)
	infos := m.client.CrdV1beta1().AntreaAgentInfos()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := infos.Get(ctx, info.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created, err := infos.Create(ctx, info, metav1.CreateOptions{})
			if err == nil {
				info = created
			}
			return err
		}
		if err != nil {
			return err
		}
		info.ObjectMeta = cur.ObjectMeta
		updated, err := infos.Update(ctx, info, metav1.UpdateOptions{})
		if err == nil {
			info = updated
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("AntreaAgentInfo %s: %w", info.Name, err)
	}
	m.mu.Lock()
	m.last = info
	m.mu.Unlock()
	return nil
}
