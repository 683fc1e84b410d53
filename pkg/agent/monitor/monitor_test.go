package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/monitor"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// asAgent is a client acting as the manifest's antrea-agent ServiceAccount,
// so the chart's RBAC is what allows the writes.
func asAgent(cfg *rest.Config) versioned.Interface {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:antrea-agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	return versioned.NewForConfigOrDie(c)
}

var age = regexp.MustCompile(`^[0-9]+[smhdy]`)

func conditionOf(info *crdv1beta1.AntreaAgentInfo, t crdv1beta1.AgentConditionType) crdv1beta1.AgentCondition {
	for _, c := range info.AgentConditions {
		if c.Type == t {
			return c
		}
	}
	return crdv1beta1.AgentCondition{}
}

// TestAgentInfoHeartbeat: against a real kube-apiserver holding the
// manifest's CRDs and RBAC, the monitor (as the antrea-agent ServiceAccount)
// creates the Node's AntreaAgentInfo with what its sources say, refreshes
// it every interval (the AgentHealthy heartbeat moves), reports an OVSDB
// outage in OVSDBConnectionUp, and once stopped its heartbeat stays where it
// was (stale), which kubectl's table shows in the LAST HEARTBEAT column.
func TestAgentInfoHeartbeat(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unused := free.Addr().(*net.TCPAddr).Port
	free.Close()
	cp.ApplyAntrea(t, ctx, unused)

	var ovsdbDown atomic.Bool
	m := monitor.New(asAgent(cp.Config), monitor.Config{NodeName: "node-1", PodName: "antrea-agent-x", PodNamespace: "kube-system",
		NodeSubnets: []string{"10.10.1.0/24"}, BridgeName: "br-int", APIPort: 10350, Interval: time.Second},
		monitor.Sources{
			OVSVersion: func(context.Context) (string, error) {
				if ovsdbDown.Load() {
					return "", errors.New("dial unix /var/run/openvswitch/db.sock: connection refused")
				}
				return "3.5.1", nil
			},
			FlowTable:    func(context.Context) (map[string]int32, error) { return map[string]int32{"0": 12, "3": 4}, nil },
			ControllerUp: func(context.Context) error { return nil },
			LocalPods:    func() int { return 3 },
			Policies: func() monitor.PolicyCounts {
				return monitor.PolicyCounts{NetworkPolicies: 2, AddressGroups: 1, AppliedToGroups: 2}
			},
		})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { m.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { stop(); <-stopped })

	infos := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1().AntreaAgentInfos()
	var info *crdv1beta1.AntreaAgentInfo
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		info, err = infos.Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no AntreaAgentInfo node-1: %v", err)
	}
	if info.NodeRef.Name != "node-1" || info.PodRef.Name != "antrea-agent-x" || info.PodRef.Namespace != "kube-system" ||
		info.OVSInfo.Version != "3.5.1" || info.OVSInfo.BridgeName != "br-int" || info.OVSInfo.FlowTable["0"] != 12 ||
		info.LocalPodNum != 3 || info.NetworkPolicyControllerInfo.NetworkPolicyNum != 2 ||
		info.NetworkPolicyControllerInfo.AppliedToGroupNum != 2 || info.APIPort != 10350 ||
		len(info.NodeSubnets) != 1 || info.Version == "" {
		t.Errorf("AntreaAgentInfo = %+v", info)
	}
	for _, ct := range []crdv1beta1.AgentConditionType{crdv1beta1.AgentHealthy, crdv1beta1.ControllerConnectionUp,
		crdv1beta1.OVSDBConnectionUp, crdv1beta1.OpenflowConnectionUp} {
		if c := conditionOf(info, ct); c.Status != corev1.ConditionTrue || c.LastHeartbeatTime.IsZero() {
			t.Errorf("condition %s = %+v, want True with a heartbeat", ct, c)
		}
	}
	// The monitor records what it wrote once the API server answered: the
	// object may be readable a moment before.
	var got any
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err = m.Info(ctx)
		return err == nil, nil
	}); err != nil || got.(*crdv1beta1.AntreaAgentInfo).Name != "node-1" {
		t.Errorf("Info (the agent API's /agentinfo) = %v, %v", got, err)
	}

	heartbeat := func() metav1.Time {
		i, err := infos.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return conditionOf(i, crdv1beta1.AgentHealthy).LastHeartbeatTime
	}
	first := heartbeat()
	// The heartbeat moves (lastHeartbeatTime has whole seconds).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return heartbeat().After(first.Time), nil
	}); err != nil {
		t.Errorf("the heartbeat did not move from %v", first)
	}

	ovsdbDown.Store(true)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		i, err := infos.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := conditionOf(i, crdv1beta1.OVSDBConnectionUp)
		return c.Status == corev1.ConditionFalse && c.Reason == "OVSDBConnectionDown" && c.Message != "", nil
	}); err != nil {
		t.Errorf("OVSDBConnectionUp did not turn False on an OVSDB outage: %v", err)
	}

	// Stopped: the heartbeat stays where it was for good.
	stop()
	<-stopped
	last := heartbeat()
	time.Sleep(2500 * time.Millisecond) // 2.5 intervals
	if hb := heartbeat(); !hb.Equal(&last) {
		t.Errorf("heartbeat moved from %v to %v after the agent stopped", last, hb)
	}

	// kubectl get antreaagentinfos: the table has the heartbeat column, and
	// its cell is the AgentHealthy lastHeartbeatTime (kubectl prints its age).
	raw, err := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1().RESTClient().Get().Resource("antreaagentinfos").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Last Heartbeat" && c.Type == "date" {
			col = i
		}
	}
	if col < 0 || len(table.Rows) != 1 {
		t.Fatalf("table columns %+v, %d rows: want a Last Heartbeat date column and one row", table.ColumnDefinitions, len(table.Rows))
	}
	// The server renders a date column as an age ("2s", "5m"): how long
	// ago the agent last reported, the stale heartbeat showing as it grows.
	if cell, _ := table.Rows[0].Cells[col].(string); !age.MatchString(cell) {
		t.Errorf("Last Heartbeat cell %q, want the heartbeat's age", cell)
	}
	// A connection that comes back shows before the next heartbeat: with an
	// hour between heartbeats, node-2's ControllerConnectionUp goes False
	// while the controller is unreachable and True soon after it is back.
	var controllerDown atomic.Bool
	controllerDown.Store(true)
	m2 := monitor.New(asAgent(cp.Config), monitor.Config{NodeName: "node-2", BridgeName: "br-int",
		Interval: time.Hour, RecheckInterval: 200 * time.Millisecond},
		monitor.Sources{ControllerUp: func(context.Context) error {
			if controllerDown.Load() {
				return errors.New("no open watch of the controlplane API for networkpolicies")
			}
			return nil
		}})
	run2, stop2 := context.WithCancel(ctx)
	stopped2 := make(chan struct{})
	go func() { m2.Run(run2); close(stopped2) }()
	t.Cleanup(func() { stop2(); <-stopped2 })
	controllerUp := func(want corev1.ConditionStatus) error {
		return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			i, err := infos.Get(ctx, "node-2", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return conditionOf(i, crdv1beta1.ControllerConnectionUp).Status == want, nil
		})
	}
	if err := controllerUp(corev1.ConditionFalse); err != nil {
		t.Fatalf("node-2's ControllerConnectionUp did not turn False: %v", err)
	}
	controllerDown.Store(false)
	if err := controllerUp(corev1.ConditionTrue); err != nil {
		t.Errorf("node-2's ControllerConnectionUp stayed False after the controller came back (heartbeats an hour apart): %v", err)
	}
	t.Run("a pod count that moves refreshes before the heartbeat", func(t *testing.T) { podCountRefreshesEarly(t, ctx, cp) })
}

// podCountRefreshesEarly: with an hour between
// heartbeats, a pod created on the Node shows in localPodNum within seconds,
// and the early refreshes keep their minimum gap: a count that moves every
// few milliseconds for a while gives a handful of writes, not hundreds.
func podCountRefreshesEarly(t *testing.T, ctx context.Context, cp *apiservertest.ControlPlane) {
	var pods atomic.Int32
	pods.Store(1)
	m := monitor.New(asAgent(cp.Config), monitor.Config{NodeName: "node-3", BridgeName: "br-int", Interval: time.Hour,
		PodCountCheck: 50 * time.Millisecond, MinRefreshGap: 500 * time.Millisecond},
		monitor.Sources{LocalPods: func() int { return int(pods.Load()) }})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { m.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { stop(); <-stopped })

	infos := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1().AntreaAgentInfos()
	count := func(want int32) error {
		return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			i, err := infos.Get(ctx, "node-3", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return i.LocalPodNum == want, nil
		})
	}
	if err := count(1); err != nil {
		t.Fatalf("the first AntreaAgentInfo does not count 1 pod: %v", err)
	}
	pods.Store(2)
	if err := count(2); err != nil {
		t.Fatalf("a second pod did not show before the next heartbeat (an hour away): %v", err)
	}
	// Churn: the count moves every 5 ms for 2 s. At most one write per
	// gap (500 ms) follows: the resourceVersion counts the writes.
	i, err := infos.Get(ctx, "node-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var writes int
	w, err := infos.Watch(ctx, metav1.ListOptions{ResourceVersion: i.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range w.ResultChan() {
			writes++
		}
	}()
	end := time.Now().Add(2 * time.Second)
	for n := int32(3); time.Now().Before(end); n++ {
		pods.Store(n)
		time.Sleep(5 * time.Millisecond)
	}
	final := pods.Load()
	if err := count(final); err != nil {
		t.Fatalf("localPodNum did not settle on the last count %d: %v", final, err)
	}
	w.Stop()
	<-done
	// 2 s of churn plus the settling write, one per 500 ms: 6 at most.
	if writes < 1 || writes > 6 {
		t.Errorf("%d writes of the AntreaAgentInfo during 2 s of churn with a 500 ms minimum gap, want 1 to 6", writes)
	}
}
