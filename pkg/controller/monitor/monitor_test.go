package monitor_test

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/monitor"
)

// TestControllerInfoHeartbeatAndStaleAgentInfos: as the manifest's
// antrea-controller ServiceAccount against a real kube-apiserver, the
// monitor writes AntreaControllerInfo antrea-controller with its counts and
// a ControllerHealthy heartbeat that moves, and deletes the AntreaAgentInfo
// of a Node that is gone while keeping that of a Node that exists.
func TestControllerInfoHeartbeatAndStaleAgentInfos(t *testing.T) {
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

	admin := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-1", "node-gone"} {
		ai := &crdv1beta1.AntreaAgentInfo{ObjectMeta: metav1.ObjectMeta{Name: n}, NodeRef: corev1.ObjectReference{Kind: "Node", Name: n}}
		if _, err := admin.AntreaAgentInfos().Create(ctx, ai, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	as := rest.CopyConfig(cp.Config)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:antrea-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	m := monitor.New(versioned.NewForConfigOrDie(as), kubernetes.NewForConfigOrDie(as),
		monitor.Config{PodName: "antrea-controller-x", PodNamespace: "kube-system", NodeName: "node-1",
			ServiceNamespace: "kube-system", ServiceName: "antrea", APIPort: 10349, Interval: time.Second},
		func() monitor.Counts {
			return monitor.Counts{NetworkPolicies: 4, AddressGroups: 2, AppliedToGroups: 3, ConnectedAgents: 2}
		})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { m.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { stop(); <-stopped })

	var info *crdv1beta1.AntreaControllerInfo
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		info, err = admin.AntreaControllerInfos().Get(ctx, monitor.Name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no AntreaControllerInfo: %v", err)
	}
	if info.PodRef.Name != "antrea-controller-x" || info.NodeRef.Name != "node-1" || info.ServiceRef.Name != "antrea" ||
		info.NetworkPolicyControllerInfo.NetworkPolicyNum != 4 || info.ConnectedAgentNum != 2 || info.APIPort != 10349 ||
		len(info.ControllerConditions) != 1 || info.ControllerConditions[0].Status != corev1.ConditionTrue {
		t.Errorf("AntreaControllerInfo = %+v", info)
	}
	first := info.ControllerConditions[0].LastHeartbeatTime
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		i, err := admin.AntreaControllerInfos().Get(ctx, monitor.Name, metav1.GetOptions{})
		return err == nil && i.ControllerConditions[0].LastHeartbeatTime.After(first.Time), nil
	}); err != nil {
		t.Errorf("the controller's heartbeat did not move from %v", first)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.AntreaAgentInfos().Get(ctx, "node-gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the AntreaAgentInfo of a deleted Node stayed")
	}
	if _, err := admin.AntreaAgentInfos().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the AntreaAgentInfo of an existing Node: %v", err)
	}
}
