package cniserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

func confWithPortMappings(mappings string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea","runtimeConfig":{"portMappings":%s}}`, mappings))
}

func TestPortMappingsAreParsedOrRefusedNamingTheField(t *testing.T) {
	netns := t.TempDir()
	full := validation{needNetns: true, needContainer: true, needPod: true}
	for _, tc := range []struct {
		name, mappings, want string
	}{
		{"a host port of 0", `[{"hostPort":0,"containerPort":80,"protocol":"tcp"}]`, "runtimeConfig.portMappings[0].hostPort"},
		{"a container port above 65535", `[{"hostPort":80,"containerPort":70000,"protocol":"tcp"}]`, "runtimeConfig.portMappings[0].containerPort"},
		{"SCTP", `[{"hostPort":80,"containerPort":80,"protocol":"tcp"},{"hostPort":80,"containerPort":80,"protocol":"sctp"}]`, "runtimeConfig.portMappings[1].protocol"},
		{"a host IP that is not one", `[{"hostPort":80,"containerPort":80,"protocol":"tcp","hostIP":"node-1"}]`, "runtimeConfig.portMappings[0].hostIP"},
		{"a multicast host IP", `[{"hostPort":80,"containerPort":80,"protocol":"tcp","hostIP":"ff02::1"}]`, "runtimeConfig.portMappings[0].hostIP"},
		{"the same port twice, once on every address", `[{"hostPort":80,"containerPort":80,"protocol":"udp","hostIP":"172.30.0.11"},{"hostPort":80,"containerPort":81,"protocol":"udp"}]`,
			"runtimeConfig.portMappings[1].hostPort"},
		{"portMappings that are not a list", `{"hostPort":80}`, "network configuration is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequest(req("c", netns, "eth0", podArgs, confWithPortMappings(tc.mappings)), full)
			pe := toProto(err)
			if err == nil || !strings.Contains(pe.Message, tc.want) {
				t.Errorf("parseRequest = %v, want an error naming %q", err, tc.want)
			}
		})
	}
	t.Run("every hostPort form of the Conformance spec is accepted", func(t *testing.T) {
		r, err := parseRequest(req("c", netns, "eth0", podArgs, confWithPortMappings(`[
			{"hostPort":54323,"containerPort":8080,"protocol":"tcp","hostIP":"127.0.0.1"},
			{"hostPort":54323,"containerPort":8080,"protocol":"TCP","hostIP":"172.30.0.11"},
			{"hostPort":54323,"containerPort":8081,"protocol":"udp","hostIP":"172.30.0.11"},
			{"hostPort":54324,"containerPort":8080,"hostIP":"0.0.0.0"},
			{"hostPort":54324,"containerPort":8080,"hostIP":"0.0.0.0"},
			{"hostPort":54323,"containerPort":8080,"protocol":"tcp","hostIP":"::1"}]`)), full)
		if err != nil {
			t.Fatal(err)
		}
		want := []types.PortMapping{
			{HostPort: 54323, ContainerPort: 8080, Protocol: types.ProtocolTCP, HostIP: netip.MustParseAddr("127.0.0.1")},
			{HostPort: 54323, ContainerPort: 8080, Protocol: types.ProtocolTCP, HostIP: netip.MustParseAddr("172.30.0.11")},
			{HostPort: 54323, ContainerPort: 8081, Protocol: types.ProtocolUDP, HostIP: netip.MustParseAddr("172.30.0.11")},
			{HostPort: 54324, ContainerPort: 8080, Protocol: types.ProtocolTCP},
			// The spec's localhost on an IPv6 cluster.
			{HostPort: 54323, ContainerPort: 8080, Protocol: types.ProtocolTCP, HostIP: netip.MustParseAddr("::1")},
		}
		if fmt.Sprint(r.PortMappings) != fmt.Sprint(want) {
			t.Errorf("mappings %v, want %v (the repeated one once)", r.PortMappings, want)
		}
	})
}

// recordingHostPorts stands in for nodenet.HostPorts (tested on its own,
// against the real nft): it records what the server asks and refuses a
// conflict the way nodenet does.
type recordingHostPorts struct {
	mu   sync.Mutex
	pods map[string]nodenet.PodHostPorts
	dels []string
}

func (r *recordingHostPorts) Add(_ context.Context, key string, p nodenet.PodHostPorts) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range p.Mappings {
		for k, o := range r.pods {
			for _, om := range o.Mappings {
				if k != key && m.Overlaps(om) {
					return &nodenet.ConflictError{Index: i, Mapping: m, OtherPod: o.Pod, Other: om}
				}
			}
		}
	}
	r.pods[key] = p
	return nil
}

func (r *recordingHostPorts) Delete(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, key)
	r.dels = append(r.dels, key)
	return nil
}

func (r *recordingHostPorts) Installed(key string) []types.PortMapping {
	p, _ := r.get(key)
	return p.Mappings
}

func (r *recordingHostPorts) get(key string) (nodenet.PodHostPorts, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[key]
	return p, ok
}

func TestHostPortsGoFromTheRuntimeToTheNodeAndSurviveARestart(t *testing.T) {
	ovsinstance.RequireRoot(t)
	hp := &recordingHostPorts{pods: map[string]nodenet.PodHostPorts{}}
	e := newEnv(t, false)
	e.stopSrv()
	e.agentStore = true
	e.hostPorts = hp
	e.startServer(true)
	ctx := ctxT(t)
	mappings := []map[string]any{
		{"hostPort": 54323, "containerPort": 8080, "protocol": "tcp", "hostIP": "127.0.0.1"},
		{"hostPort": 54323, "containerPort": 8081, "protocol": "udp"},
	}
	withPorts := func(p *pod) *libcni.RuntimeConf {
		rt := *p.rt
		rt.CapabilityArgs = map[string]any{"portMappings": mappings}
		return &rt
	}

	a := e.newPod("hp-a")
	if _, err := e.cni.AddNetworkList(ctx, e.list, withPorts(a)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	key := hostPortKey(a.rt.ContainerID, "eth0")
	got, ok := hp.get(key)
	if !ok || len(got.Mappings) != 2 || got.Mappings[0].String() != "tcp 127.0.0.1:54323->8080" || got.Mappings[1].String() != "udp *:54323->8081" ||
		len(got.IPs) != 1 || got.Pod != "default/hp-a" {
		t.Fatalf("installed hostPorts %+v (%v), want both mappings of default/hp-a to its address", got, ok)
	}
	pd, err := e.ports.GetPortData(ctx, e.hostIfName(a))
	if err != nil {
		t.Fatal(err)
	}
	if s := pd.ExternalIDs[interfacestore.ExternalIDPortMappings]; !strings.Contains(s, `"hostIP":"127.0.0.1"`) || !strings.Contains(s, `"protocol":"udp"`) {
		t.Errorf("OVS port external_ids %s = %q, want both mappings", interfacestore.ExternalIDPortMappings, s)
	}

	if err := e.cni.CheckNetworkList(ctx, e.list, withPorts(a)); err != nil {
		t.Errorf("CHECK of a pod whose hostPorts are installed: %v", err)
	}
	t.Run("CHECK reports hostPorts that went missing", func(t *testing.T) {
		saved, _ := hp.get(key)
		_ = hp.Delete(ctx, key)
		err := e.cni.CheckNetworkList(ctx, e.list, withPorts(a))
		hp.mu.Lock()
		hp.pods[key] = saved
		hp.mu.Unlock()
		if err == nil || !strings.Contains(err.Error(), "hostPorts installed") {
			t.Errorf("CHECK without the hostPorts = %v, want a problem naming them", err)
		}
	})

	t.Run("a pod claiming the same port is refused, naming the entry, and leaves nothing", func(t *testing.T) {
		b := e.newPod("hp-b")
		_, err := e.cni.AddNetworkList(ctx, e.list, withPorts(b))
		if err == nil || cniCode(err) != uint(cnipb.ErrorCode_INVALID_NETWORK_CONFIG) || !strings.Contains(err.Error(), "runtimeConfig.portMappings[0].hostPort") ||
			!strings.Contains(err.Error(), "default/hp-a") {
			t.Fatalf("ADD of a conflicting pod = %v, want INVALID_NETWORK_CONFIG naming portMappings[0] and hp-a", err)
		}
		if _, err := e.ports.GetPortData(ctx, e.hostIfName(b)); err == nil {
			t.Errorf("the refused pod's OVS port is still there")
		}
		if _, ok := hp.get(hostPortKey(b.rt.ContainerID, "eth0")); ok {
			t.Errorf("the refused pod's hostPorts are recorded")
		}
	})

	t.Run("a restarted agent finds the mappings in OVSDB", func(t *testing.T) {
		e.stopSrv()
		e.startServer(true)
		cfg := e.srv.lookup(a.rt.ContainerID, "eth0")
		if cfg == nil || len(cfg.PortMappings) != 2 || HostPortKey(cfg) != key || fmt.Sprint(PodHostPorts(cfg).Mappings) != fmt.Sprint(got.Mappings) {
			t.Fatalf("recovered interface %+v, want hp-a's two mappings", cfg)
		}
	})

	if err := e.cni.DelNetworkList(ctx, e.list, withPorts(a)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if _, ok := hp.get(key); ok {
		t.Errorf("hostPorts of hp-a are still installed after DEL")
	}
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
