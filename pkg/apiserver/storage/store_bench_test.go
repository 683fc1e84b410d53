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
