package networkpolicy

import (
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// parseIPsWithNet is how Pod addresses were parsed before podMemberBlock:
// net.ParseIP, IPv4 in 4 bytes. It is the oracle of the block's parser.
func parseIPsWithNet(pod *v1.Pod) []controlplane.IPAddress {
	var out []controlplane.IPAddress
	add := func(s string) {
		if ip := net.ParseIP(s); ip != nil {
			if v4 := ip.To4(); v4 != nil {
				out = append(out, controlplane.IPAddress(v4))
			} else {
				out = append(out, controlplane.IPAddress(ip.To16()))
			}
		}
	}
	if len(pod.Status.PodIPs) == 0 {
		if pod.Status.PodIP != "" {
			add(pod.Status.PodIP)
		}
		return out
	}
	for _, ip := range pod.Status.PodIPs {
		add(ip.IP)
	}
	return out
}

// TestPodMemberMatchesReference checks the single-allocation member and key
// against net.ParseIP and controlplane.MemberKey on addresses of every form.
func TestPodMemberMatchesReference(t *testing.T) {
	statuses := []v1.PodStatus{
		{},
		{PodIP: "10.0.0.1"},
		{PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}},
		{PodIPs: []v1.PodIP{{IP: "fd00::a:0:0:1"}, {IP: "192.168.1.255"}}},
		{PodIPs: []v1.PodIP{{IP: "::ffff:10.1.2.3"}}},
		{PodIPs: []v1.PodIP{{IP: "::1.2.3.4"}, {IP: "2001:db8::"}, {IP: "::"}, {IP: "0.0.0.0"}}},
		{PodIPs: []v1.PodIP{{IP: "fe80::1%eth0"}, {IP: "010.0.0.1"}, {IP: "bad"}, {IP: ""}}},
		{PodIPs: []v1.PodIP{{IP: "fd00::1"}, {IP: "fd00::2"}, {IP: "fd00::3"}}},
	}
	ports := [][]v1.ContainerPort{nil, {{Name: "http", ContainerPort: 8080}, {ContainerPort: 9}, {Name: "dns", ContainerPort: 53, Protocol: v1.ProtocolUDP}}}
	for i, st := range statuses {
		for _, ps := range ports {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Ports: ps}}},
				Status:     st,
			}
			m := podMember(pod)
			if want := parseIPsWithNet(pod); !reflect.DeepEqual(m.IPs, want) {
				t.Errorf("status %d: IPs %v, net.ParseIP gives %v", i, m.IPs, want)
			}
			if m.Pod == nil || m.Pod.Namespace != "ns" || m.Pod.Name != "p" || !reflect.DeepEqual(m.Ports, namedPorts(pod)) {
				t.Errorf("status %d: member %+v", i, m)
			}
			if got, want := podMemberKey(m), controlplane.MemberKey(m); got != want {
				t.Errorf("status %d: key %q, MemberKey gives %q", i, got, want)
			}
		}
	}
	// A 16-byte IPv4-mapped address (not what podMember builds) keys as
	// MemberKey does.
	m := &controlplane.GroupMember{Pod: &controlplane.PodReference{Namespace: "a", Name: "b"},
		IPs: []controlplane.IPAddress{controlplane.IPAddress(net.ParseIP("1.2.3.4")), {1, 2, 3}}}
	if got, want := podMemberKey(m), controlplane.MemberKey(m); got != want {
		t.Errorf("key %q, MemberKey gives %q", got, want)
	}
}

// TestNameUUIDMatchesUUIDv5 checks the allocation-free group name against
// github.com/google/uuid's name-based UUID, also for keys beyond the stack
// buffer.
func TestNameUUIDMatchesUUIDv5(t *testing.T) {
	for _, k := range []string{"", "namespace=ns podSelector=app=a", strings.Repeat("x", 239), strings.Repeat("y", 240), strings.Repeat("z", 1000)} {
		if got, want := nameUUID(k), uuid.NewSHA1(groupNamespace, []byte(k)).String(); got != want {
			t.Errorf("nameUUID(%d bytes) = %s, uuid.NewSHA1 gives %s", len(k), got, want)
		}
	}
}

// TestKeySet checks the compact key set against a map through a sequence
// of inserts and deletes crossing its one-key form.
func TestKeySet(t *testing.T) {
	var s keySet
	want := map[string]bool{}
	check := func(step string) {
		t.Helper()
		if s.Len() != len(want) {
			t.Fatalf("%s: Len %d, want %d", step, s.Len(), len(want))
		}
		got := map[string]bool{}
		for k := range s.All {
			got[k] = true
		}
		for _, k := range s.List() {
			if !got[k] {
				t.Fatalf("%s: List has %q, All does not", step, k)
			}
		}
		if !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Fatalf("%s: keys %v, want %v", step, got, want)
		}
		for _, k := range []string{"a", "b", "c", ""} {
			if s.Has(k) != want[k] {
				t.Fatalf("%s: Has(%q) = %v", step, k, s.Has(k))
			}
		}
	}
	ops := []struct {
		insert bool
		key    string
	}{{true, "a"}, {true, "a"}, {false, "b"}, {true, "b"}, {true, "c"}, {false, "a"}, {false, "b"}, {false, "c"}, {true, "b"}, {false, "a"}, {false, "b"}}
	for i, op := range ops {
		if op.insert {
			s.Insert(op.key)
			want[op.key] = true
		} else {
			s.Delete(op.key)
			delete(want, op.key)
		}
		check(fmt.Sprintf("op %d", i))
	}
}

// TestAddressGroupSpanIsUnionOfLinkedSpans drives link, unlink and span
// changes of AppliedToGroups at random and checks after each step that an
// AddressGroup's span is the union of its linked groups' spans, and that it
// is marked dirty whenever its span changed.
func TestAddressGroupSpanIsUnionOfLinkedSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomSpan := func() sets.Set[string] {
		s := sets.New[string]()
		for i := rng.IntN(4); i > 0; i-- {
			s.Insert(fmt.Sprintf("node-%d", rng.IntN(6)))
		}
		return s
	}
	atgs := make([]*appliedToGroupState, 4)
	for i := range atgs {
		atgs[i] = &appliedToGroupState{addressGroups: map[*addressGroupState]int{}, span: randomSpan()}
	}
	ag := &addressGroupState{appliedToGroups: map[*appliedToGroupState]int{}, span: sets.New[string]()}
	for step := 0; step < 3000; step++ {
		before := sets.New(ag.span.UnsortedList()...)
		ag.dirty = false
		atg := atgs[rng.IntN(len(atgs))]
		switch rng.IntN(3) {
		case 0:
			link(atg, ag)
		case 1:
			if atg.addressGroups[ag] > 0 {
				unlink(atg, ag)
			}
		case 2:
			old := atg.span
			atg.span = randomSpan()
			if atg.addressGroups[ag] > 0 {
				ag.moveSpan(old, atg.span)
			}
		}
		want := sets.New[string]()
		for a := range ag.appliedToGroups {
			want = want.Union(a.span)
		}
		if !ag.span.Equal(want) {
			t.Fatalf("step %d: span %v, union of linked spans %v", step, sets.List(ag.span), sets.List(want))
		}
		if !before.Equal(ag.span) && !ag.dirty {
			t.Fatalf("step %d: span changed from %v to %v without dirty", step, sets.List(before), sets.List(ag.span))
		}
	}
}
