package ovsconfigtest

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// contractCases are behaviours consumers rely on; each runs against the fake
// and against a real ovsdb-server + ovs-vswitchd, so the fake cannot drift.
var contractCases = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, br ovsconfig.OVSBridgeClient)
}{
	{"an internal port gets its requested OpenFlow port and is listed with its external_ids", func(t *testing.T, ctx context.Context, br ovsconfig.OVSBridgeClient) {
		ids := map[string]string{"container-id": "c1", "pod-name": "web"}
		uuid, err := br.CreateInternalPort(ctx, "p1", 7, "0a:00:00:00:00:07", ids)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := br.GetOFPort(ctx, "p1"); err != nil || got != 7 {
			t.Fatalf("GetOFPort = %d, %v; want 7", got, err)
		}
		ports, err := br.GetPortList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ports {
			names = append(names, p.Name)
			if p.Name == "p1" && (p.UUID != uuid || !reflect.DeepEqual(p.ExternalIDs, ids) || p.IFType != "internal" || p.MAC != "0a:00:00:00:00:07") {
				t.Errorf("listed p1 = %+v", p)
			}
		}
		if !reflect.DeepEqual(names, []string{"br-c", "p1"}) {
			t.Errorf("port names = %v, want the bridge's local port and p1, sorted", names)
		}
	}},
	{"a tunnel port carries flow-based options", func(t *testing.T, ctx context.Context, br ovsconfig.OVSBridgeClient) {
		if _, err := br.CreateTunnelPort(ctx, ovsconfig.TunnelConfig{Name: "tun0", Type: ovsconfig.VXLANTunnel, OFPortRequest: 1, CSum: true}); err != nil {
			t.Fatal(err)
		}
		p, err := br.GetPortData(ctx, "tun0")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"remote_ip": "flow", "key": "flow", "csum": "true"}
		if p.IFType != "vxlan" || !reflect.DeepEqual(p.Options, want) {
			t.Errorf("tun0 = %+v, want vxlan with %v", p, want)
		}
	}},
	{"a taken name, a missing port and a bad type are refused with the same errors", func(t *testing.T, ctx context.Context, br ovsconfig.OVSBridgeClient) {
		uuid, err := br.CreateInternalPort(ctx, "p2", 0, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := br.CreateInternalPort(ctx, "p2", 0, "", nil); !errors.Is(err, ovsconfig.ErrAlreadyExists) ||
			err.Error() != "create port p2 on bridge br-c: port p2 already exists" {
			t.Errorf("duplicate: %v", err)
		}
		if err := br.DeletePort(ctx, uuid); err != nil {
			t.Fatal(err)
		}
		if err := br.DeletePort(ctx, uuid); !errors.Is(err, ovsconfig.ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
		if _, err := br.GetPortData(ctx, "p2"); err == nil || err.Error() != "port p2 on bridge br-c not found" {
			t.Errorf("GetPortData of a deleted port: %v", err)
		}
		if _, err := br.CreatePortWithConfig(ctx, ovsconfig.PortConfig{Name: "p3", Type: "bogus"}); err == nil ||
			err.Error() != `port p3: bad type "bogus"` {
			t.Errorf("bad type: %v", err)
		}
		if _, err := br.GetOFPort(ctx, "p3"); err == nil || err.Error() != "interface p3 not found" {
			t.Errorf("GetOFPort of a refused port: %v", err)
		}
	}},
	{"external_ids of a port are replaced and bridge external_ids merged", func(t *testing.T, ctx context.Context, br ovsconfig.OVSBridgeClient) {
		if _, err := br.CreateInternalPort(ctx, "p4", 0, "", map[string]string{"a": "1"}); err != nil {
			t.Fatal(err)
		}
		if err := br.SetPortExternalIDs(ctx, "p4", map[string]string{"b": "2"}); err != nil {
			t.Fatal(err)
		}
		if p, err := br.GetPortData(ctx, "p4"); err != nil || !reflect.DeepEqual(p.ExternalIDs, map[string]string{"b": "2"}) {
			t.Errorf("p4 external_ids = %v, %v", p, err)
		}
		if err := br.SetExternalIDs(ctx, map[string]string{"x": "1"}); err != nil {
			t.Fatal(err)
		}
		if err := br.SetExternalIDs(ctx, map[string]string{"y": "2"}); err != nil {
			t.Fatal(err)
		}
		if got, err := br.GetExternalIDs(ctx); err != nil || !reflect.DeepEqual(got, map[string]string{"x": "1", "y": "2"}) {
			t.Errorf("bridge external_ids = %v, %v; want both keys", got, err)
		}
		if err := br.SetPortExternalIDs(ctx, "nope", nil); !errors.Is(err, ovsconfig.ErrNotFound) {
			t.Errorf("missing port: %v", err)
		}
	}},
}

func TestFakeBridgeHonoursTheContract(t *testing.T) {
	for _, tc := range contractCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			br := NewFakeBridge("br-c", ovsconfig.OVSDatapathNetdev)
			if err := br.Create(ctx); err != nil {
				t.Fatal(err)
			}
			tc.run(t, ctx, br)
		})
	}
}

func TestRealBridgeHonoursTheContract(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs Open vSwitch")
	}
	in := ovsinstance.StartForTest(t, "ovsdb")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := ovsconfig.Connect(ctx, in.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range contractCases {
		t.Run(tc.name, func(t *testing.T) {
			br := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: "br-c", DatapathType: ovsconfig.OVSDatapathNetdev})
			if err := br.Create(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := br.Delete(ctx); err != nil {
					t.Error(err)
				}
			}()
			tc.run(t, ctx, br)
		})
	}
}

func TestFakeReportsAFailedInterfaceLikeOVS(t *testing.T) {
	ctx := context.Background()
	br := NewFakeBridge("br-c", "")
	_ = br.Create(ctx)
	br.FailInterface("ghost0", "could not open network device ghost0 (No such device)")
	if _, err := br.CreatePort(ctx, "ghost0", nil); err != nil {
		t.Fatal(err)
	}
	_, err := br.GetOFPort(ctx, "ghost0")
	if err == nil || !strings.Contains(err.Error(), "interface ghost0: ovs-vswitchd failed to add it (ofport -1): could not open network device ghost0") {
		t.Errorf("err = %v", err)
	}
}
