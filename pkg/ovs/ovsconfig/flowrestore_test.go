package ovsconfig

import "testing"

func TestFlowRestoreWaitIsReadAndClearedLeavingOtherKeys(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	if held, err := conn.FlowRestoreWait(ctx); err != nil || held {
		t.Fatalf("a new OVS: FlowRestoreWait = %v, %v; want false", held, err)
	}
	// As the agent image's start_ovs does before ovs-vswitchd starts.
	vsctl(t, in, "set", "Open_vSwitch", ".", "other_config:flow-restore-wait=true", "other_config:keep=me")
	if held, err := conn.FlowRestoreWait(ctx); err != nil || !held {
		t.Fatalf("after ovs-vsctl set: FlowRestoreWait = %v, %v; want true", held, err)
	}
	if err := conn.ClearFlowRestoreWait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, in, "get", "Open_vSwitch", ".", "other_config"); got != `{keep=me}` {
		t.Errorf("other_config after ClearFlowRestoreWait = %s, want only keep=me", got)
	}
	if held, err := conn.FlowRestoreWait(ctx); err != nil || held {
		t.Errorf("after the clear: FlowRestoreWait = %v, %v; want false", held, err)
	}
	if err := conn.ClearFlowRestoreWait(ctx); err != nil {
		t.Errorf("clearing twice: %v", err)
	}
}
