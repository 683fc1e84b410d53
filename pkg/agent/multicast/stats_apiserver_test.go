package multicast

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/openflow"
)

// switchCounters stands for OVS (a process boundary): the counters it
// would report, by pod port.
type switchCounters map[uint32]openflow.MulticastCounters

func (switchCounters) SetMulticastFlows(context.Context, openflow.MulticastFlows) error { return nil }
func (s switchCounters) MulticastPodStats(context.Context) (map[uint32]openflow.MulticastCounters, error) {
	return s, nil
}

// TestTheAgentAPIServesPodMulticastStatsToTheAntctlRole: the agent API
// (real server, real kube-apiserver with the manifest's RBAC) serves
// /podmulticaststats, with upstream's parameters namespace and name, to a
// user bound to the antctl ClusterRole and to the agent's own
// ServiceAccount (antctl in local mode), and to nobody else.
func TestTheAgentAPIServesPodMulticastStatsToTheAntctlRole(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	for i, name := range []string{"recv", "send"} {
		iface := interfacestore.NewContainerInterface("veth-"+name, "c-"+name, name, "demo", "eth0", nil, []net.IP{net.IPv4(10, 10, 1, byte(2+i))}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(3 + i)}
		store.AddInterface(iface)
	}
	c := NewController(Config{Interfaces: store, Flows: switchCounters{3: {Inbound: 100}, 4: {Outbound: 100}}})
	api := agentapitest.Start(t, &agentapi.Querier{NodeName: "node-1"}, func(s *agentapi.Server) { s.Handle(PodStatsPath, c.PodStatsHandler()) })
	antctl := agentapitest.Token(t, api.Ctx, api.Kube, "alice", "antctl")
	var all []apis.PodMulticastStats
	if err := json.Unmarshal(agentapitest.GetOK(t, api.Ctx, api.URL, antctl, PodStatsPath), &all); err != nil {
		t.Fatal(err)
	}
	want := []apis.PodMulticastStats{{PodName: "recv", PodNamespace: "demo", Inbound: 100}, {PodName: "send", PodNamespace: "demo", Outbound: 100}}
	if len(all) != 2 || all[0] != want[0] || all[1] != want[1] {
		t.Errorf("GET %s: %+v, want %+v", PodStatsPath, all, want)
	}
	var one []apis.PodMulticastStats
	if err := json.Unmarshal(agentapitest.GetOK(t, api.Ctx, api.URL, antctl, PodStatsPath+"?namespace=demo&name=send"), &one); err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 || one[0] != want[1] {
		t.Errorf("GET %s?namespace=demo&name=send: %+v, want [%+v]", PodStatsPath, one, want[1])
	}
	agent := agentapitest.Token(t, api.Ctx, api.Kube, "agent", "antrea-agent")
	agentapitest.GetOK(t, api.Ctx, api.URL, agent, PodStatsPath)
	nobody := agentapitest.Token(t, api.Ctx, api.Kube, "bob")
	if code, _ := agentapitest.Get(api.Ctx, api.URL, nobody, PodStatsPath); code != http.StatusForbidden {
		t.Errorf("GET %s by a user without the antctl role: %d, want 403", PodStatsPath, code)
	}
}
