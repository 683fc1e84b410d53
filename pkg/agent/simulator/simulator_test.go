package simulator

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// The simulator's end-to-end test (real kube-apiserver and controller) is
// test/scale's TestSimulatedAgentsHoldTheirSpan.

func TestARecordNamesThePolicySourceAndThePodsAGroupAdds(t *testing.T) {
	at := time.Now()
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "uid-1", Generation: 3},
		SourceRef: &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "ns", Name: "web"}}
	r := record(at, "networkpolicies", Modified, np)
	b, _ := json.Marshal(np)
	if r.Source != "K8sNetworkPolicy/ns/web" || r.Generation != 3 || r.Name != "uid-1" || r.Bytes != len(b) || !r.At.Equal(at) {
		t.Errorf("policy record %+v (JSON %d bytes)", r, len(b))
	}
	patch := &cpv1beta2.AddressGroupPatch{ObjectMeta: metav1.ObjectMeta{Name: "g"},
		AddedGroupMembers:   []cpv1beta2.GroupMember{{Pod: &cpv1beta2.PodReference{Namespace: "ns", Name: "a"}}, {Node: &cpv1beta2.NodeReference{Name: "n"}}},
		RemovedGroupMembers: []cpv1beta2.GroupMember{{Pod: &cpv1beta2.PodReference{Namespace: "ns", Name: "b"}}}}
	if r := record(at, "addressgroups", Modified, patch); r.Name != "g" || len(r.Added) != 1 || r.Added[0] != "ns/a" {
		t.Errorf("patch record %+v, want the one pod added", r)
	}
	full := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg"},
		GroupMembers: []cpv1beta2.GroupMember{{Pod: &cpv1beta2.PodReference{Namespace: "ns", Name: "c"}}}}
	if r := record(at, "appliedtogroups", Added, full); len(r.Added) != 1 || r.Added[0] != "ns/c" {
		t.Errorf("ADDED group record %+v, want its pod", r)
	}
	if r := record(at, "appliedtogroups", Listed, full); len(r.Added) != 0 {
		t.Errorf("a listed group is not an addition: %+v", r)
	}
}

func TestSinceReturnsTheRecordsFromATimeOn(t *testing.T) {
	a := &Agent{}
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		a.records = append(a.records, Record{At: t0.Add(time.Duration(i) * time.Second), Name: string(rune('a' + i))})
	}
	got := a.Since(t0.Add(2 * time.Second))
	if len(got) != 3 || got[0].Name != "c" || got[2].Name != "e" {
		t.Errorf("Since(t0+2s) = %+v, want c, d, e", got)
	}
	if len(a.Since(t0.Add(time.Minute))) != 0 || len(a.Since(t0)) != 5 {
		t.Errorf("Since at the ends: %d, %d", len(a.Since(t0.Add(time.Minute))), len(a.Since(t0)))
	}
}
