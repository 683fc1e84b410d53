package storage

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// BenchmarkUpdateWithHundredNodeWatchers is the cost of one AppliedToGroup
// member change while 100 agents (one per Node) watch: each change concerns
// one Node, so it should cost about the same with 10 or 1000 watchers.
//
//	go test -run '^$' -bench UpdateWithHundredNodeWatchers ./pkg/apiserver/storage/
func BenchmarkUpdateWithHundredNodeWatchers(b *testing.B) {
	const nodes = 100
	s := NewAppliedToGroupStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	groups := make([]*types.AppliedToGroup, nodes)
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("n%d", n)
		groups[n] = &types.AppliedToGroup{Name: "g-" + node, SpanMeta: types.SpanMeta{NodeNames: sets.New(node)}}
		if err := s.Create(groups[n]); err != nil {
			b.Fatal(err)
		}
		w, err := s.Watch(ctx, WatchOptions{Selectors: onNode(node)})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i % nodes
		node := fmt.Sprintf("n%d", n)
		g := *groups[n]
		m := pod(fmt.Sprintf("p%d", i), "10.0.0.1")
		g.Members = []types.NodeMember{{Node: node, Key: controlplane.MemberKey(m), Member: m}}
		if err := s.Update(&g); err != nil {
			b.Fatal(err)
		}
		groups[n] = &g
	}
}

// BenchmarkListOneNodesSpan is one agent's list (as after a controller
// restart, 1,000 times over) of a store of 10,000 AppliedToGroups, 10 on
// each of 1,000 Nodes, and 3 that span every Node: it returns 13 objects.
//
//	go test -run '^$' -bench ListOneNodesSpan ./pkg/apiserver/storage/
func BenchmarkListOneNodesSpan(b *testing.B) {
	const nodes, perNode = 1000, 10
	s := NewAppliedToGroupStore()
	all := sets.New[string]()
	for n := 0; n < nodes; n++ {
		all.Insert(fmt.Sprintf("n%d", n))
	}
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("n%d", n)
		for i := 0; i < perNode; i++ {
			if err := s.Create(&types.AppliedToGroup{Name: fmt.Sprintf("g-%s-%d", node, i), SpanMeta: types.SpanMeta{NodeNames: sets.New(node)}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := 0; i < 3; i++ {
		if err := s.Create(&types.AppliedToGroup{Name: fmt.Sprintf("everywhere-%d", i), SpanMeta: types.SpanMeta{NodeNames: all}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		objs, _ := s.ListObjects(onNode(fmt.Sprintf("n%d", i%nodes)))
		if len(objs) != perNode+3 {
			b.Fatalf("%d objects, want %d", len(objs), perNode+3)
		}
	}
}
