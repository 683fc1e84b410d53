package ovsinstance

import (
	"context"
	"strings"
	"testing"
)

func TestInstanceRunsBridgeInItsNetNS(t *testing.T) {
	in := StartForTest(t, "ovsinst")
	if _, err := in.Vsctl("add-br", "br-test", "--", "set", "bridge", "br-test", "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	out, err := in.Ofctl("dump-flows", "br-test")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "actions=NORMAL") {
		t.Fatalf("a new bridge should hold the NORMAL flow, got:\n%s", out)
	}
	if out, err := in.Run("ip", "link", "show", "br-test"); err != nil || !strings.Contains(out, "br-test") {
		t.Fatalf("internal port br-test should exist in netns %s: %v %s", in.NetNS(), err, out)
	}
	if err := in.RestartVSwitchd(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Ofctl("dump-flows", "br-test"); err != nil {
		t.Fatalf("bridge should come back after a vswitchd restart: %v", err)
	}
}
