package storage

import (
	"math/rand"
	"sort"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// TestIndexesMatchTheObjects writes random policies (creates, updates that
// change their groups, deletes; groups shared by several policies, repeated
// within one) and checks after every write that GetByIndex returns exactly
// the stored policies whose GetAppliedToGroups / GetAddressGroups hold the
// value, and that Get and List agree with what was written. The indexes are
// first read after 500 writes, so both their build and their upkeep are checked.
func TestIndexesMatchTheObjects(t *testing.T) {
	s := NewNetworkPolicyStore()
	rng := rand.New(rand.NewSource(1))
	groupName := func() string { return "g" + strconv.Itoa(rng.Intn(6)) }
	groups := func() []string {
		var l []string
		for n := rng.Intn(3); n > 0; n-- {
			l = append(l, groupName())
		}
		return l
	}
	randomPolicy := func(name string) *types.NetworkPolicy {
		p := &types.NetworkPolicy{Name: name, SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()}, AppliedToGroups: groups()}
		for r := rng.Intn(3); r > 0; r-- {
			p.Rules = append(p.Rules, controlplane.NetworkPolicyRule{
				From:            controlplane.NetworkPolicyPeer{AddressGroups: groups()},
				To:              controlplane.NetworkPolicyPeer{AddressGroups: groups()},
				AppliedToGroups: groups(),
			})
		}
		return p
	}
	want := map[string]*types.NetworkPolicy{}
	for i := 0; i < 2000; i++ {
		name := "p" + strconv.Itoa(rng.Intn(12))
		_, exists := want[name]
		switch {
		case !exists:
			p := randomPolicy(name)
			if err := s.Create(p); err != nil {
				t.Fatal(err)
			}
			want[name] = p
		case rng.Intn(3) == 0:
			if err := s.Delete(name); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
		default:
			p := randomPolicy(name)
			if err := s.Update(p); err != nil {
				t.Fatal(err)
			}
			want[name] = p
		}
		if got := len(s.List()); got != len(want) {
			t.Fatalf("write %d: List has %d policies, want %d", i, got, len(want))
		}
		for name, p := range want {
			if got, ok, _ := s.Get(name); !ok || got != p {
				t.Fatalf("write %d: Get(%s) = %v, %v; want the last written policy", i, name, got, ok)
			}
		}
		if i < 500 {
			// The indexes are built on their first read: first from
			// the policies written so far, then kept up to date.
			continue
		}
		for g := 0; g < 6; g++ {
			value := "g" + strconv.Itoa(g)
			for _, index := range []struct {
				name   string
				values func(*types.NetworkPolicy) sets.Set[string]
			}{
				{AppliedToGroupIndex, (*types.NetworkPolicy).GetAppliedToGroups},
				{AddressGroupIndex, (*types.NetworkPolicy).GetAddressGroups},
			} {
				var expected []string
				for name, p := range want {
					if index.values(p).Has(value) {
						expected = append(expected, name)
					}
				}
				objs, err := s.GetByIndex(index.name, value)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, obj := range objs {
					p := obj.(*types.NetworkPolicy)
					if want[p.Name] != p {
						t.Fatalf("write %d: GetByIndex(%s, %s) returned a policy not stored: %s", i, index.name, value, p.Name)
					}
					got = append(got, p.Name)
				}
				sort.Strings(expected)
				sort.Strings(got)
				if len(got) != len(expected) || len(got) > 0 && !sets.New(got...).Equal(sets.New(expected...)) || len(sets.New(got...)) != len(got) {
					t.Fatalf("write %d: GetByIndex(%s, %s) = %v, want %v", i, index.name, value, got, expected)
				}
			}
		}
	}
	if _, err := s.GetByIndex("nope", "g0"); err == nil {
		t.Error("GetByIndex of an unknown index gave no error")
	}
}
