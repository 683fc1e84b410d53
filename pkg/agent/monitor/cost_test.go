package monitor_test

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/monitor"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestHeartbeatCost (ANTREA_MEASURE=1) measures the CPU one refresh of the
// AntreaAgentInfo costs the agent process (getrusage over 50 Syncs against
// a real kube-apiserver, whose own CPU is another process's): logged, not
// asserted. At one refresh per minute this is the monitoring's whole cost.
func TestHeartbeatCost(t *testing.T) {
	if os.Getenv("ANTREA_MEASURE") == "" {
		t.Skip("set ANTREA_MEASURE=1 to measure")
	}
	cp := apiservertest.Start(t)
	ctx := context.Background()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unused := free.Addr().(*net.TCPAddr).Port
	free.Close()
	cp.ApplyAntrea(t, ctx, unused)
	m := monitor.New(asAgent(cp.Config), monitor.Config{NodeName: "node-1", BridgeName: "br-int", APIPort: 10350},
		monitor.Sources{
			OVSVersion:   func(context.Context) (string, error) { return "3.5.1", nil },
			FlowTable:    func(context.Context) (map[string]int32, error) { return map[string]int32{"0": 12, "3": 4}, nil },
			ControllerUp: func(context.Context) error { return nil },
			LocalPods:    func() int { return 3 },
		})
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const n = 50
	c0, s0 := cpu(), time.Now()
	for i := 0; i < n; i++ {
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d refreshes (get + update) in %v: %.2f ms CPU each in the agent process",
		n, time.Since(s0).Round(time.Millisecond), float64(cpu()-c0)/n/float64(time.Millisecond))
}
