package interfacestore

import (
	"context"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

func TestStoreRebuiltFromOVSDBAfterAnAgentRestartEqualsTheOneBefore(t *testing.T) {
	in := ovsinstance.StartForTest(t, "ovsdb")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := ovsconfig.Connect(ctx, in.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	brCfg := ovsconfig.BridgeConfig{Name: "br-int", DatapathType: ovsconfig.OVSDatapathNetdev}
	br := ovsconfig.NewOVSBridge(conn, brCfg)
	if err := br.Create(ctx); err != nil {
		t.Fatal(err)
	}

	before := NewInterfaceStore()
	for _, cfg := range sampleInterfaces(t) {
		ids := BuildOVSPortExternalIDs(cfg)
		var uuid string
		var err error
		switch cfg.Type {
		case ContainerInterface:
			// The host end of the pod's veth, inside the node netns where vswitchd runs.
			if out, err := exec.Command("ip", "-n", in.NetNS(), "link", "add", cfg.InterfaceName, "type", "veth",
				"peer", "name", cfg.InterfaceName[:8]+"-p").CombinedOutput(); err != nil {
				t.Fatalf("veth %s: %v: %s", cfg.InterfaceName, err, out)
			}
			uuid, err = br.CreatePort(ctx, cfg.InterfaceName, ids)
		case GatewayInterface:
			uuid, err = br.CreateInternalPort(ctx, cfg.InterfaceName, 0, cfg.MAC.String(), ids)
		case TunnelInterface:
			uuid, err = br.CreateTunnelPort(ctx, ovsconfig.TunnelConfig{
				Name: cfg.InterfaceName, Type: cfg.TunnelInterfaceConfig.Type, CSum: cfg.CSum, ExternalIDs: ids,
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		ofPort, err := br.GetOFPort(ctx, cfg.InterfaceName)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OVSPortConfig = &OVSPortConfig{PortUUID: uuid, OFPort: ofPort}
		before.AddInterface(cfg)
	}
	conn.Close()

	// A restarted agent: a new connection, the port list, and nothing else.
	conn2, err := ovsconfig.Connect(ctx, in.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	ports, err := ovsconfig.NewOVSBridge(conn2, brCfg).GetPortList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := NewInterfaceStore()
	after.Initialize(InterfaceConfigsFromOVSPorts(ports))

	if a, b := before.ListInterfaces(), after.ListInterfaces(); !reflect.DeepEqual(a, b) {
		for i := range a {
			if i < len(b) && !reflect.DeepEqual(a[i], b[i]) {
				t.Errorf("interface %d differs:\nbefore %+v %+v %+v %+v\n after %+v %+v %+v %+v", i,
					*a[i], a[i].OVSPortConfig, a[i].ContainerInterfaceConfig, a[i].TunnelInterfaceConfig,
					*b[i], b[i].OVSPortConfig, b[i].ContainerInterfaceConfig, b[i].TunnelInterfaceConfig)
			}
		}
		t.Fatalf("rebuilt store has %d interfaces, before %d", len(b), len(a))
	}
	if got, ok := after.GetInterfaceByIP("10.10.0.6"); !ok || got.ContainerID != "cid-2" || got.OFPort <= 0 {
		t.Errorf("rebuilt store lookup by IP = %+v, %v", got, ok)
	}
}
