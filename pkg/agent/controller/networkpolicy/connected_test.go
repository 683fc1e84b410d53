package networkpolicy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// TestControllerConnectedFollowsTheWatches: the agent counts as connected to
// the controller (AntreaAgentInfo's ControllerConnectionUp) exactly while
// every policy watch is open; a failing watch is named in the error.
func TestControllerConnectedFollowsTheWatches(t *testing.T) {
	client := newClient()
	var refuse atomic.Bool
	refuse.Store(true)
	client.PrependWatchReactor("addressgroups", func(k8stesting.Action) (bool, watch.Interface, error) {
		if refuse.Load() {
			return true, nil, fmt.Errorf("the server is currently unable to handle the request")
		}
		return false, nil, nil
	})
	c := NewController("n1", client, &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}, interfacestore.NewInterfaceStore(), Options{})
	if err := c.ControllerConnected(); err == nil || !strings.Contains(err.Error(), "networkpolicies, addressgroups, appliedtogroups") {
		t.Fatalf("before Run: ControllerConnected() = %v, want every watcher named", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	waitConnected := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := c.ControllerConnected()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ControllerConnected() = %q, want %q", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitConnected("no open watch of the controlplane API for addressgroups")
	refuse.Store(false)
	waitConnected("")
}
