package multicast

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"antrea.io/antrea/pkg/agent/interfacestore"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

func TestGroupsNameTheLocalPodsOfEachJoinedGroup(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	for i, p := range []struct{ ns, name string }{{"b", "y"}, {"a", "x"}, {"a", "z"}} {
		iface := interfacestore.NewContainerInterface("veth-"+p.name, "c-"+p.name, p.name, p.ns, "eth0", nil,
			[]net.IP{net.IPv4(10, 10, 1, byte(2+i))}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(10 + i)}
		store.AddInterface(iface)
	}
	c := NewController(Config{Interfaces: store})
	g1, g2, g3 := netip.MustParseAddr("225.1.2.3"), netip.MustParseAddr("239.0.0.1"), netip.MustParseAddr("224.5.5.5")
	c.record(10, []membership{{group: g1, join: true}, {group: g2, join: true}}) // b/y
	c.record(11, []membership{{group: g1, join: true}})                          // a/x
	c.record(12, []membership{{group: g2, join: true}})                          // a/z, which then leaves
	c.record(12, []membership{{group: g2, join: false}})
	c.record(99, []membership{{group: g3, join: true}}) // a port that is no pod's
	want := []cpv1beta2.MulticastGroupInfo{
		{Group: "225.1.2.3", Pods: []cpv1beta2.PodReference{{Namespace: "a", Name: "x"}, {Namespace: "b", Name: "y"}}},
		{Group: "239.0.0.1", Pods: []cpv1beta2.PodReference{{Namespace: "b", Name: "y"}}},
	}
	if got := c.Groups(); !reflect.DeepEqual(got, want) {
		t.Errorf("Groups() = %+v\nwant %+v", got, want)
	}
}
