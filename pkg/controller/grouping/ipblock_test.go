package grouping

import (
	"net/netip"
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func blockSel(cidr string, except ...string) *Selector {
	var ex []netip.Prefix
	for _, e := range except {
		ex = append(ex, netip.MustParsePrefix(e))
	}
	return NewIPBlockSelector(netip.MustParsePrefix(cidr), ex)
}

func dualStackPod(ns, name string, ips ...string) *v1.Pod {
	p := newPod(ns, name, nil, ips[0], "n1")
	p.Status.PodIPs = nil
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
	}
	return p
}

func TestIPBlockSelectorKeysAreEqualExactlyWhenBlocksAreWrittenAlike(t *testing.T) {
	tests := []struct {
		name      string
		a, b      *Selector
		wantEqual bool
	}{
		{"excepts in another order give one key",
			blockSel("10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16"), blockSel("10.0.0.0/8", "10.2.0.0/16", "10.1.0.0/16"), true},
		{"an unmasked CIDR is the block it masks to",
			blockSel("10.0.0.7/8"), blockSel("10.0.0.0/8"), true},
		{"an except written twice counts once",
			blockSel("10.0.0.0/8", "10.1.0.0/16", "10.1.0.0/16"), blockSel("10.0.0.0/8", "10.1.0.0/16"), true},
		{"an except outside the CIDR excludes nothing and is dropped",
			blockSel("10.0.0.0/8", "192.168.0.0/16"), blockSel("10.0.0.0/8"), true},
		{"an IPv4-mapped CIDR is its IPv4 block",
			blockSel("::ffff:10.0.0.0/104"), blockSel("10.0.0.0/8"), true},
		{"a block with an except differs from the block without",
			blockSel("10.0.0.0/8", "10.1.0.0/16"), blockSel("10.0.0.0/8"), false},
		{"overlapping blocks are different groups",
			blockSel("10.0.0.0/8"), blockSel("10.0.0.0/16"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Key() == tt.b.Key(); got != tt.wantEqual {
				t.Errorf("keys %q and %q: equal=%v, want %v", tt.a.Key(), tt.b.Key(), got, tt.wantEqual)
			}
		})
	}
	if k, l := blockSel("10.0.0.0/8").Key(), mustSelector(t, "", nil, sel(nil)).Key(); k == l {
		t.Errorf("an ipBlock key %q equals a label selector key", k)
	}
}

func TestIPBlockGroupsHoldThePodsWithAnAddressInTheBlock(t *testing.T) {
	pods := []*v1.Pod{
		newPod("x", "a", map[string]string{"app": "web"}, "10.0.0.1", "n1"),
		newPod("x", "b", nil, "10.0.1.2", "n1"),
		newPod("y", "c", nil, "10.1.0.3", "n2"),
		newPod("y", "pending", nil, "", ""),
		dualStackPod("z", "dual", "fd00::5", "10.2.0.5"),
		newPod("z", "v6", nil, "fd00::6", "n2"),
	}
	tests := []struct {
		name  string
		block *Selector
		want  []string
	}{
		{"a block holds the pods of every namespace whose address it covers",
			blockSel("10.0.0.0/8"), []string{"x/a", "x/b", "y/c", "z/dual"}},
		{"an except takes its pods out",
			blockSel("10.0.0.0/8", "10.0.1.0/24", "10.2.0.5/32"), []string{"x/a", "y/c"}},
		{"a block of one address holds the one pod",
			blockSel("10.0.1.2/32"), []string{"x/b"}},
		{"a block no pod is in holds nobody",
			blockSel("192.168.0.0/16"), []string{}},
		{"an IPv6 block holds a dual-stack pod by its IPv6 address",
			blockSel("fd00::/64"), []string{"z/dual", "z/v6"}},
		{"the whole IPv4 space holds every pod with an IPv4 address",
			blockSel("0.0.0.0/0"), []string{"x/a", "x/b", "y/c", "z/dual"}},
	}
	for _, tt := range tests {
		for _, order := range []string{"group first", "pods first"} {
			t.Run(tt.name+", "+order, func(t *testing.T) {
				idx := NewIndex()
				if order == "group first" {
					idx.AddGroup(tt.block)
				}
				for _, p := range pods {
					idx.AddPod(p)
				}
				key := idx.AddGroup(tt.block)
				if got := members(t, idx, key); !slices.Equal(got, tt.want) {
					t.Errorf("members = %v, want %v", got, tt.want)
				}
			})
		}
	}
}

func TestPodEventsNotifyExactlyTheIPBlockGroupsWhoseMembersChange(t *testing.T) {
	groups := map[string]*Selector{
		"10/8 except 10.1/16": blockSel("10.0.0.0/8", "10.1.0.0/16"),
		"10.1/16":             blockSel("10.1.0.0/16"),
		"10.1.0/24":           blockSel("10.1.0.0/24"),
		"web":                 mustSelector(t, "x", sel(map[string]string{"app": "web"}), nil),
	}
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	type step struct {
		do   func(*Index)
		want []string
	}
	tests := []struct {
		name        string
		steps       []step
		wantMembers map[string][]string
	}{
		{
			name: "a new pod notifies every block holding it and no block excepting it",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.1.0.9", "n1")) }, []string{"10.1.0/24", "10.1/16"}},
			},
			wantMembers: map[string][]string{"10/8 except 10.1/16": {}, "10.1/16": {"x/a"}, "10.1.0/24": {"x/a"}},
		},
		{
			name: "a relabel notifies the label groups only",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.0.0.1", "n1")) }, []string{"10/8 except 10.1/16"}},
				{func(i *Index) { i.AddPod(newPod("x", "a", web, "10.0.0.1", "n1")) }, []string{"web"}},
			},
			wantMembers: map[string][]string{"10/8 except 10.1/16": {"x/a"}, "web": {"x/a"}},
		},
		{
			name: "an IP change moves a pod from one block to the others",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.0.0.1", "n1")) }, []string{"10/8 except 10.1/16"}},
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.1.0.1", "n1")) }, []string{"10.1.0/24", "10.1/16", "10/8 except 10.1/16"}},
			},
			wantMembers: map[string][]string{"10/8 except 10.1/16": {}, "10.1/16": {"x/a"}, "10.1.0/24": {"x/a"}},
		},
		{
			name: "an IP change inside the blocks holding a pod notifies them, as its member changes",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.1.0.1", "n1")) }, []string{"10.1.0/24", "10.1/16"}},
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.1.0.2", "n1")) }, []string{"10.1.0/24", "10.1/16"}},
			},
			wantMembers: map[string][]string{"10.1/16": {"x/a"}, "10.1.0/24": {"x/a"}},
		},
		{
			name: "a pod losing its IP leaves its blocks",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "10.1.0.1", "n1")) }, []string{"10.1.0/24", "10.1/16"}},
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "", "n1")) }, []string{"10.1.0/24", "10.1/16"}},
			},
			wantMembers: map[string][]string{"10.1/16": {}, "10.1.0/24": {}},
		},
		{
			name: "a pod deleted and re-created with a new IP changes blocks",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", web, "10.1.5.1", "n1")) }, []string{"10.1/16", "web"}},
				{func(i *Index) { i.DeletePod("x", "a") }, []string{"10.1/16", "web"}},
				{func(i *Index) { i.AddPod(newPod("x", "a", web, "10.3.0.1", "n2")) }, []string{"10/8 except 10.1/16", "web"}},
			},
			wantMembers: map[string][]string{"10/8 except 10.1/16": {"x/a"}, "10.1/16": {}, "web": {"x/a"}},
		},
		{
			name: "a pod outside every block notifies no block",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("x", "a", db, "192.168.0.1", "n1")) }, []string{}},
				{func(i *Index) { i.DeletePod("x", "a") }, []string{}},
			},
			wantMembers: map[string][]string{"10/8 except 10.1/16": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := NewIndex()
			rec := &recorder{}
			idx.AddEventHandler(rec.handle)
			names, keys := map[string]string{}, map[string]string{}
			for name, s := range groups {
				k := idx.AddGroup(s)
				names[k], keys[name] = name, k
			}
			for n, st := range tt.steps {
				st.do(idx)
				got := []string{}
				for _, k := range rec.take() {
					got = append(got, names[k])
				}
				sort.Strings(got)
				sort.Strings(st.want)
				if !slices.Equal(got, st.want) {
					t.Errorf("step %d: affected groups %v, want %v", n, got, st.want)
				}
			}
			for name, want := range tt.wantMembers {
				if got := members(t, idx, keys[name]); !slices.Equal(got, want) {
					t.Errorf("group %s members = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestPodsAndIPBlockGroupsThatGoLeaveNothingFiled(t *testing.T) {
	idx := NewIndex()
	k1 := idx.AddGroup(blockSel("10.0.0.0/8", "10.1.0.0/16"))
	k2 := idx.AddGroup(blockSel("10.0.0.0/8"))
	k3 := idx.AddGroup(blockSel("fd00::/64"))
	idx.AddPod(newPod("x", "a", nil, "10.0.0.1", "n1"))
	idx.AddPod(newPod("x", "a", nil, "10.3.0.1", "n1"))
	idx.AddPod(dualStackPod("x", "a", "10.4.0.1", "fd00::1"))
	idx.DeleteGroup(k1)
	if got := members(t, idx, k2); !slices.Equal(got, []string{"x/a"}) {
		t.Errorf("after deleting another group on the same CIDR, members = %v, want [x/a]", got)
	}
	idx.DeletePod("x", "a")
	if len(idx.blocks.near)+len(idx.blocks.addrs) != 0 {
		t.Errorf("a pod that changed addresses and went is still filed: %v, %v", idx.blocks.near, idx.blocks.addrs)
	}
	idx.DeleteGroup(k2)
	idx.DeleteGroup(k3)
	if n := len(idx.blocks.byCIDR); n != 0 {
		t.Errorf("%d CIDRs still filed", n)
	}
	if l := idx.blocks.lengths; len(l[0])+len(l[1]) != 0 {
		t.Errorf("prefix lengths still in use: %v", l)
	}
	if idx.blocks.near != nil || idx.blocks.addrs != nil {
		t.Errorf("pods still filed by address without blocks: %v, %v", idx.blocks.near, idx.blocks.addrs)
	}
	if pods, nss, groups := idx.Counts(); pods+nss+groups != 0 {
		t.Errorf("index holds %d pods, %d namespaces, %d groups after deleting everything", pods, nss, groups)
	}
}
