package ovsconfig

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

const nsPrefix = "ovsdb"

// startOVS starts a private OVS instance and connects a client to it; both go
// away when the test ends.
func startOVS(t *testing.T) (*ovsinstance.Instance, *Connection) {
	t.Helper()
	in := ovsinstance.StartForTest(t, nsPrefix)
	return in, connect(t, in)
}

func connect(t *testing.T, in *ovsinstance.Instance) *Connection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := Connect(ctx, in.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func newBridge(t *testing.T, conn *Connection, name string) *OVSBridge {
	t.Helper()
	br := NewOVSBridge(conn, BridgeConfig{Name: name, DatapathType: OVSDatapathNetdev})
	if err := br.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return br
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func vsctl(t *testing.T, in *ovsinstance.Instance, args ...string) string {
	t.Helper()
	out, err := in.Vsctl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// addVeth creates a veth pair inside the instance's netns (where ovs-vswitchd
// opens system ports); the netns removal deletes it.
func addVeth(t *testing.T, in *ovsinstance.Instance, name, peer string) {
	t.Helper()
	for _, args := range [][]string{
		{"-n", in.NetNS(), "link", "add", name, "type", "veth", "peer", "name", peer},
		{"-n", in.NetNS(), "link", "set", name, "up"},
		{"-n", in.NetNS(), "link", "set", peer, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
}

func TestBridgeCreateConvergesWithoutReplacingTheBridge(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := NewOVSBridge(conn, BridgeConfig{
		Name: "br-int", DatapathType: OVSDatapathNetdev,
		OtherConfig: map[string]string{"disable-in-band": "true"}, ExternalIDs: map[string]string{"owner": "antrea"},
	})
	if err := br.Create(ctx); err != nil {
		t.Fatal(err)
	}
	uuid1, err := br.GetBridgeUUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for col, want := range map[string]string{
		"datapath_type": "netdev", "fail_mode": "secure", "protocols": "[OpenFlow13, OpenFlow15]",
		"other_config:disable-in-band": `"true"`, "external_ids:owner": "antrea", "_uuid": uuid1,
	} {
		if got := vsctl(t, in, "get", "bridge", "br-int", col); got != want {
			t.Errorf("bridge column %s = %s, want %s", col, got, want)
		}
	}
	// A drifted column is put back; the bridge keeps its UUID.
	vsctl(t, in, "set", "bridge", "br-int", "fail_mode=standalone")
	// Create reads the monitored cache; let the drift reach it first.
	if err := waitFor(ctx, func() (bool, error) {
		row, err := br.bridge(ctx)
		return err == nil && row != nil && row.FailMode != nil && *row.FailMode == "standalone", err
	}); err != nil {
		t.Fatal(err)
	}
	if err := br.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, in, "get", "bridge", "br-int", "fail_mode"); got != "secure" {
		t.Errorf("fail_mode after second Create = %s, want secure", got)
	}
	if uuid2, _ := br.GetBridgeUUID(ctx); uuid2 != uuid1 {
		t.Errorf("second Create replaced the bridge: uuid %s, want %s", uuid2, uuid1)
	}
	// The bridge's local internal port exists, as with ovs-vsctl add-br.
	if out, err := in.Run("ip", "link", "show", "br-int"); err != nil {
		t.Errorf("local port br-int should exist: %v %s", err, out)
	}
	if err := br.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if out := vsctl(t, in, "list-br"); out != "" {
		t.Errorf("bridges after Delete: %q, want none", out)
	}
}

func TestEveryPortKindIsCreatedReadBackAndDeleted(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	addVeth(t, in, "pod1-host", "pod1-eth0")

	tests := []struct {
		name       string
		create     func() (string, error)
		port       string
		wantOFPort int32 // 0: any positive number
		wantType   string
		wantCols   map[string]string
	}{
		{
			name: "a veth end becomes a system port with its external_ids",
			port: "pod1-host",
			create: func() (string, error) {
				return br.CreatePort(ctx, "pod1-host", map[string]string{"container-id": "c1"})
			},
			wantCols: map[string]string{
				"interface:type": `""`, "port:external_ids:container-id": "c1",
			},
		},
		{
			name: "an internal port gets the requested MAC and OpenFlow port",
			port: "gw0",
			create: func() (string, error) {
				return br.CreateInternalPort(ctx, "gw0", 2, "0a:00:00:00:00:02", nil)
			},
			wantOFPort: 2,
			wantType:   "internal",
			wantCols:   map[string]string{"interface:type": "internal", "interface:mac": `"0a:00:00:00:00:02"`},
		},
		{
			name: "an internal access port carries its VLAN tag",
			port: "antrea-ext.10",
			create: func() (string, error) {
				return br.CreatePortWithConfig(ctx, PortConfig{Name: "antrea-ext.10", Type: InterfaceTypeInternal, VLAN: 10})
			},
			wantType: "internal",
			wantCols: map[string]string{"interface:type": "internal", "port:tag": "10"},
		},
		{
			name: "a flow-based Geneve tunnel gets remote_ip=flow and key=flow",
			port: "tun-geneve",
			create: func() (string, error) {
				return br.CreateTunnelPort(ctx, TunnelConfig{Name: "tun-geneve", Type: GeneveTunnel, OFPortRequest: 1})
			},
			wantOFPort: 1,
			wantType:   "geneve",
			wantCols: map[string]string{
				"interface:type": "geneve", "interface:options:remote_ip": "flow", "interface:options:key": "flow",
			},
		},
		{
			name: "a flow-based VXLAN tunnel carries the checksum option",
			port: "tun-vxlan",
			create: func() (string, error) {
				return br.CreateTunnelPort(ctx, TunnelConfig{Name: "tun-vxlan", Type: VXLANTunnel, CSum: true})
			},
			wantType: "vxlan",
			wantCols: map[string]string{
				"interface:type": "vxlan", "interface:options:remote_ip": "flow", "interface:options:csum": `"true"`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uuid, err := tc.create()
			if err != nil {
				t.Fatal(err)
			}
			ofPort, err := br.GetOFPort(ctx, tc.port)
			if err != nil {
				t.Fatal(err)
			}
			if ofPort <= 0 || (tc.wantOFPort != 0 && ofPort != tc.wantOFPort) {
				t.Errorf("ofport = %d, want %d (0: any positive)", ofPort, tc.wantOFPort)
			}
			if got := vsctl(t, in, "get", "interface", tc.port, "ofport"); got != itoa(ofPort) {
				t.Errorf("ovs-vsctl says ofport %s, client says %d", got, ofPort)
			}
			if got := vsctl(t, in, "get", "port", tc.port, "_uuid"); got != uuid {
				t.Errorf("port uuid = %s, client returned %s", got, uuid)
			}
			for col, want := range tc.wantCols {
				table, rest, _ := strings.Cut(col, ":")
				if got := vsctl(t, in, "get", table, tc.port, rest); got != want {
					t.Errorf("%s = %s, want %s", col, got, want)
				}
			}
			data, err := br.GetPortData(ctx, tc.port)
			if err != nil {
				t.Fatal(err)
			}
			if data.UUID != uuid || data.OFPort != ofPort || data.IFType != tc.wantType || data.IFName != tc.port {
				t.Errorf("GetPortData = %+v, want uuid %s ofport %d type %q", data, uuid, ofPort, tc.wantType)
			}
			if tag := vsctl(t, in, "get", "port", tc.port, "tag"); tag != fmt.Sprint(data.VLAN) && !(tag == "[]" && data.VLAN == 0) {
				t.Errorf("GetPortData's VLAN = %d, ovs-vsctl says tag %s", data.VLAN, tag)
			}
			if err := br.DeletePort(ctx, uuid); err != nil {
				t.Fatal(err)
			}
			if out, err := in.Vsctl("get", "port", tc.port, "_uuid"); err == nil {
				t.Errorf("port %s still exists after DeletePort: %s", tc.port, out)
			}
			if out, err := in.Vsctl("get", "interface", tc.port, "_uuid"); err == nil {
				t.Errorf("interface %s still exists after DeletePort: %s", tc.port, out)
			}
			if _, err := br.GetPortData(ctx, tc.port); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetPortData after delete: err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestMistakesAreAnsweredWithAnErrorNamingTheObject(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	missing := NewOVSBridge(conn, BridgeConfig{Name: "br-missing", DatapathType: OVSDatapathNetdev})
	if _, err := br.CreateInternalPort(ctx, "dup0", 0, "", nil); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		call     func() error
		wantText string
		wantIs   error
	}{
		{
			name: "a bad port type names the port and the type",
			call: func() error {
				_, err := br.CreatePortWithConfig(ctx, PortConfig{Name: "p1", Type: "bogus"})
				return err
			},
			wantText: `port p1: bad type "bogus"`,
		},
		{
			name: "a VLAN out of range names the port and the VLAN",
			call: func() error {
				_, err := br.CreatePortWithConfig(ctx, PortConfig{Name: "v1", Type: InterfaceTypeInternal, VLAN: 4095})
				return err
			},
			wantText: "port v1: VLAN 4095 out of range 1-4094",
		},
		{
			name:     "a bad tunnel type names the port",
			call:     func() error { _, err := br.CreateTunnelPort(ctx, TunnelConfig{Name: "t1", Type: "gre6"}); return err },
			wantText: `port t1: bad tunnel type "gre6"`,
		},
		{
			name:     "a port on a missing bridge names the bridge",
			call:     func() error { _, err := missing.CreatePort(ctx, "p2", nil); return err },
			wantText: "bridge br-missing not found",
			wantIs:   ErrNotFound,
		},
		{
			name:     "the OpenFlow port of a missing interface names it",
			call:     func() error { _, err := br.GetOFPort(ctx, "nope0"); return err },
			wantText: "interface nope0 not found",
			wantIs:   ErrNotFound,
		},
		{
			name: "a system port without a device reports ovs-vswitchd's reason",
			call: func() error {
				_, err := br.CreatePort(ctx, "ghost0", nil)
				_, err2 := br.GetOFPort(ctx, "ghost0")
				return errors.Join(err, err2)
			},
			wantText: "interface ghost0: ovs-vswitchd failed to add it (ofport -1): could not open network device ghost0",
		},
		{
			name:     "a second port with a taken name is refused",
			call:     func() error { _, err := br.CreateInternalPort(ctx, "dup0", 0, "", nil); return err },
			wantText: "port dup0 already exists",
			wantIs:   ErrAlreadyExists,
		},
		{
			name:     "deleting a missing bridge names it",
			call:     func() error { return missing.Delete(ctx) },
			wantText: "bridge br-missing not found",
			wantIs:   ErrNotFound,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantText)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.wantIs)
			}
		})
	}
	if out := vsctl(t, in, "list-ports", "br-int"); strings.Contains(out, "p1") {
		t.Errorf("a refused port reached OVSDB: %s", out)
	}
}

func TestExternalIDsSurviveAClientRestart(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	ids := map[string]string{"container-id": "abc", "pod-name": "web", "pod-namespace": "ns1", "ip-address": "10.0.0.5"}
	uuid, err := br.CreateInternalPort(ctx, "pod-web", 0, "", ids)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()

	br2 := NewOVSBridge(connect(t, in), BridgeConfig{Name: "br-int", DatapathType: OVSDatapathNetdev})
	ports, err := br2.GetPortList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found *OVSPortData
	for i := range ports {
		if ports[i].Name == "pod-web" {
			found = &ports[i]
		}
	}
	if found == nil {
		t.Fatalf("port pod-web missing from %+v", ports)
	}
	if found.UUID != uuid {
		t.Errorf("uuid = %s, want %s", found.UUID, uuid)
	}
	for k, v := range ids {
		if found.ExternalIDs[k] != v {
			t.Errorf("external_ids[%s] = %q, want %q", k, found.ExternalIDs[k], v)
		}
	}
	if err := br2.SetPortExternalIDs(ctx, "pod-web", map[string]string{"container-id": "xyz"}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, in, "get", "port", "pod-web", "external_ids"); got != `{container-id=xyz}` {
		t.Errorf("external_ids after SetPortExternalIDs = %s", got)
	}
}

func TestOVSVersionComesFromTheOpenVSwitchTable(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	// ovs-ctl, not ovs-vswitchd, writes ovs_version at start; do what it does.
	out, err := exec.Command("ovs-vswitchd", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	vsctl(t, in, "set", "Open_vSwitch", ".", "ovs_version="+fields[len(fields)-1])
	var got string
	if err := waitFor(ctx, func() (bool, error) {
		v, err := conn.GetOVSVersion(ctx)
		got = v
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no ovs_version: %v", err)
	}
	want := strings.Trim(vsctl(t, in, "get", "Open_vSwitch", ".", "ovs_version"), `"`)
	if got != want || !strings.HasPrefix(got, "3.") {
		t.Errorf("version = %q, want %q (3.x)", got, want)
	}
}

func TestInterfaceSettersWriteTheirColumns(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	if _, err := br.CreateTunnelPort(ctx, TunnelConfig{Name: "tun0", Type: GeneveTunnel}); err != nil {
		t.Fatal(err)
	}
	if _, err := br.CreateInternalPort(ctx, "gw0", 0, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := br.SetInterfaceOptions(ctx, "tun0", map[string]string{"remote_ip": "flow", "key": "flow", "csum": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := br.SetInterfaceMTU(ctx, "gw0", 1450); err != nil {
		t.Fatal(err)
	}
	if err := br.SetInterfaceMAC(ctx, "gw0", "0a:00:00:00:00:09"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ table, row, col, want string }{
		{"interface", "tun0", "options:csum", `"true"`},
		{"interface", "gw0", "mtu_request", "1450"},
		{"interface", "gw0", "mac", `"0a:00:00:00:00:09"`},
	} {
		if got := vsctl(t, in, "get", c.table, c.row, c.col); got != c.want {
			t.Errorf("%s %s %s = %s, want %s", c.table, c.row, c.col, got, c.want)
		}
	}
	if err := br.SetInterfaceMTU(ctx, "missing0", 1450); err == nil || !strings.Contains(err.Error(), "interface missing0 not found") {
		t.Errorf("SetInterfaceMTU on a missing interface: err = %v", err)
	}
}

func TestAWriteDuringAnOVSDBRestartIsAppliedOnceAfterReconnecting(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	before, err := br.CreateInternalPort(ctx, "before0", 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}

	in.StopDB()
	done := make(chan error, 1)
	var during string
	go func() {
		var err error
		during, err = br.CreateInternalPort(ctx, "during0", 0, "", map[string]string{"k": "v"})
		done <- err
	}()
	// The write must wait for the server, not fail at once.
	select {
	case err := <-done:
		t.Fatalf("CreateInternalPort returned while ovsdb-server was down: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := in.StartDB(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write issued during the outage: %v", err)
	}
	ports := vsctl(t, in, "list-ports", "br-int")
	if strings.Count(ports, "during0") != 1 || !strings.Contains(ports, "before0") {
		t.Errorf("ports after restart = %q, want before0 and during0 once", ports)
	}
	if got := vsctl(t, in, "get", "port", "during0", "_uuid"); got != during {
		t.Errorf("during0 uuid = %s, client returned %s", got, during)
	}
	// The reconnected cache serves reads and the older port's identity is intact.
	data, err := br.GetPortData(ctx, "before0")
	if err != nil || data.UUID != before {
		t.Errorf("GetPortData(before0) = %+v, %v; want uuid %s", data, err, before)
	}
	if _, err := br.GetOFPort(ctx, "during0"); err != nil {
		t.Error(err)
	}

	// After another restart the monitor is live again: a port someone else
	// adds shows up in the client's view.
	if err := in.RestartDB(ctx); err != nil {
		t.Fatal(err)
	}
	vsctl(t, in, "add-port", "br-int", "other0", "--", "set", "interface", "other0", "type=internal")
	if err := waitFor(ctx, func() (bool, error) {
		_, err := br.GetPortData(ctx, "other0")
		return err == nil, nil
	}); err != nil {
		t.Errorf("a port added after the second restart never reached the client: %v", err)
	}
	if !conn.Connected() {
		t.Error("client reports itself disconnected after the restarts")
	}
}

func TestAWriteFailsWithAClearErrorWhenOVSDBStaysDown(t *testing.T) {
	in, conn := startOVS(t)
	br := newBridge(t, conn, "br-int")
	in.StopDB()
	t.Cleanup(func() { _ = in.StartDB(context.Background()) }) // let the client's Close find a server
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := br.CreateInternalPort(ctx, "late0", 0, "", nil)
	if err == nil || !strings.Contains(err.Error(), "create port late0 on bridge br-int") {
		t.Fatalf("err = %v, want an error naming the port and bridge", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap the deadline", err)
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// The lost-answer case (ovsdb-server committed, then the connection broke
// before the reply) cannot be timed from outside; these tests drive the two
// halves directly: the retry loop, and one attempt told it is a retry.

func TestTheRetryLoopRetriesOnlyBrokenConnections(t *testing.T) {
	_, conn := startOVS(t)
	ctx := testCtx(t)

	var retries []bool
	err := conn.do(ctx, "test write", func(ctx context.Context, retry bool) error {
		retries = append(retries, retry)
		if len(retries) == 1 {
			return fmt.Errorf("test write: transaction: %w", client.ErrNotConnected)
		}
		return nil
	})
	if err != nil || !reflect.DeepEqual(retries, []bool{false, true}) {
		t.Errorf("after a lost connection: err %v, attempts %v; want nil and [false true]", err, retries)
	}

	retries = nil
	refused := errors.New("constraint violation")
	err = conn.do(ctx, "test write", func(ctx context.Context, retry bool) error {
		retries = append(retries, retry)
		return refused
	})
	if !errors.Is(err, refused) || len(retries) != 1 {
		t.Errorf("after a refusal: err %v, attempts %d; want the refusal after one attempt", err, len(retries))
	}
}

func TestARetriedWriteRecognisesItsOwnCommittedWrite(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	cfg := PortConfig{Name: "p1", Type: InterfaceTypeInternal, ExternalIDs: map[string]string{"container-id": "c1"}}
	uuid, err := br.CreatePortWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if got, err := br.createPortOnce(ctx, "create p1", cfg, true); err != nil || got != uuid {
		t.Errorf("retried create of a committed port = %s, %v; want %s", got, err, uuid)
	}
	if _, err := br.createPortOnce(ctx, "create p1", cfg, false); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("first attempt on a taken name: %v, want ErrAlreadyExists", err)
	}
	other := cfg
	other.ExternalIDs = map[string]string{"container-id": "c2"}
	if _, err := br.createPortOnce(ctx, "create p1", other, true); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("retry finding someone else's port: %v, want ErrAlreadyExists", err)
	}
	if n := strings.Count(vsctl(t, in, "list-ports", "br-int"), "p1"); n != 1 {
		t.Errorf("p1 listed %d times, want once", n)
	}

	if err := br.deletePortsOnce(ctx, "delete p1", []string{uuid}, false); err != nil {
		t.Fatal(err)
	}
	if err := br.deletePortsOnce(ctx, "delete p1", []string{uuid}, true); err != nil {
		t.Errorf("retried delete of a deleted port: %v, want success", err)
	}
	if err := br.deletePortsOnce(ctx, "delete p1", []string{uuid}, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("first attempt on a missing port: %v, want ErrNotFound", err)
	}
}

// sessions returns how many clients ovsdb-server serves (ovs-vswitchd is one).
func sessions(t *testing.T, in *ovsinstance.Instance) string {
	t.Helper()
	out, err := in.Run("ovs-appctl", "-t", filepath.Join(in.Dir(), "ovsdb-server.ctl"), "memory/show")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "sessions:"); ok {
			return v
		}
	}
	return "0" // memory/show leaves out a zero count
}

func TestAClientClosedDuringAnOutageDoesNotComeBack(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	if got := sessions(t, in); got != "2" {
		t.Fatalf("sessions with the client connected = %s, want 2 (ovs-vswitchd and us)", got)
	}
	in.StopDB()
	conn.Close()
	if err := in.StartDB(ctx); err != nil {
		t.Fatal(err)
	}
	// ovs-vsctl waits until ovs-vswitchd has applied the change, i.e. is back.
	vsctl(t, in, "set", "Open_vSwitch", ".", "external_ids:probe=1")
	// libovsdb's loop reconnects within a reconnectInterval and Close then
	// drops that connection; leave it a few intervals to show up.
	time.Sleep(5 * reconnectInterval)
	var got string
	if err := waitFor(ctx, func() (bool, error) {
		got = sessions(t, in)
		return got == "1", nil
	}); err != nil {
		t.Errorf("sessions after Close during the outage = %s, want 1 (only ovs-vswitchd)", got)
	}
}

func TestNodeWideExternalIDsMergeOnTheOpenVSwitchRow(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	if err := conn.SetExternalIDs(ctx, map[string]string{"a": "1", "b": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetExternalIDs(ctx, map[string]string{"b": "3"}); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, in, "get", "Open_vSwitch", ".", "external_ids"); got != "{a=\"1\", b=\"3\"}" {
		t.Errorf("Open_vSwitch external_ids = %s, want a=1 and b=3", got)
	}
	got, err := conn.GetExternalIDs(ctx)
	if err != nil || !reflect.DeepEqual(got, map[string]string{"a": "1", "b": "3"}) {
		t.Errorf("GetExternalIDs = %v, %v", got, err)
	}
}

// BenchmarkCreatePortReadOFPortDelete measures what a pod ADD+DEL costs in
// OVSDB: one create transaction, the wait for ovs-vswitchd's ofport, and one
// delete transaction.
func BenchmarkCreatePortReadOFPortDelete(b *testing.B) {
	in := ovsinstance.StartForTest(b, nsPrefix)
	ctx := context.Background()
	conn, err := Connect(ctx, in.DBEndpoint())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := NewOVSBridge(conn, BridgeConfig{Name: "br-int", DatapathType: OVSDatapathNetdev})
	if err := br.Create(ctx); err != nil {
		b.Fatal(err)
	}
	ids := map[string]string{"container-id": "c", "pod-name": "p", "pod-namespace": "ns"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		uuid, err := br.CreateInternalPort(ctx, "bench0", 0, "", ids)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.GetOFPort(ctx, "bench0"); err != nil {
			b.Fatal(err)
		}
		if err := br.DeletePort(ctx, uuid); err != nil {
			b.Fatal(err)
		}
	}
}

func TestConcurrentPodPortsAreAllCreatedAndDeleted(t *testing.T) {
	in, conn := startOVS(t)
	ctx := testCtx(t)
	br := newBridge(t, conn, "br-int")
	const n = 16
	uuids := make([]string, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			var err error
			// Parallel CNI ADDs each mutate the bridge's ports; none may lose another's insert.
			uuids[i], err = br.CreateInternalPort(ctx, fmt.Sprintf("par%02d", i), 0, "", map[string]string{"i": strconv.Itoa(i)})
			if err == nil {
				_, err = br.GetOFPort(ctx, fmt.Sprintf("par%02d", i))
			}
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ports := strings.Fields(vsctl(t, in, "list-ports", "br-int"))
	if len(ports) != n {
		t.Fatalf("br-int has %d ports after %d parallel creates: %v", len(ports), n, ports)
	}
	for i := 0; i < n; i++ {
		go func(i int) { errs <- br.DeletePort(ctx, uuids[i]) }(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if out := vsctl(t, in, "list-ports", "br-int"); out != "" {
		t.Errorf("ports left after parallel deletes: %q", out)
	}
}
