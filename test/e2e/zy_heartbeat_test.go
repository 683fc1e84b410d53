package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/test/labtest"
)

// firstHeartbeats are the agents' heartbeat times TestMonitoring saw, by
// node.
var firstHeartbeats = map[string]time.Time{}

// TestAgentHeartbeatsMove: every agent refreshes its AntreaAgentInfo's
// heartbeat (every 60 s). It checks the heartbeats TestMonitoring saw, after
// the tests between them ran (minutes), so the package does not wait a
// minute for it; it runs before zz_teardown_test.go ends the lab.
func TestAgentHeartbeatsMove(t *testing.T) {
	e := requireLab(t)
	if len(firstHeartbeats) == 0 {
		t.Skip("TestMonitoring did not run: no heartbeat to compare with (go test -run 'TestMonitoring|TestAgentHeartbeatsMove')")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crd := versioned.NewForConfigOrDie(e.Config).CrdV1beta1()
	for node, first := range firstHeartbeats {
		labtest.WaitFor(t, ctx, "a newer heartbeat of "+node, func() error {
			i, err := crd.AntreaAgentInfos().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if hb := agentCondition(i, crdv1beta1.AgentHealthy).LastHeartbeatTime; !hb.After(first) {
				return fmt.Errorf("heartbeat still %v", hb)
			}
			return nil
		})
	}
}
