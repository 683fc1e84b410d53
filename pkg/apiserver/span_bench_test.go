package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// agentStream is one raw watch of one resource for one node, through
// kube-apiserver and the aggregation proxy, counting what the agent receives.
type agentStream struct {
	events  int
	bytes   int64
	markers int
	done    chan struct{}
	err     error
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

func watchRaw(ctx context.Context, client *http.Client, host, resource, node, marker string) *agentStream {
	s := &agentStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		url := fmt.Sprintf("%s/apis/controlplane.antrea.io/v1beta2/%s?watch=1&fieldSelector=nodeName%%3D%s", strings.TrimSuffix(host, "/"), resource, node)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			s.err = err
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			s.err = err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			s.err = fmt.Errorf("watch %s: %s", url, resp.Status)
			return
		}
		dec := json.NewDecoder(bufio.NewReader(countingReader{resp.Body, &s.bytes}))
		for {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				if ctx.Err() == nil {
					s.err = fmt.Errorf("watch %s ended before the marker: %w", url, err)
				}
				return
			}
			s.events++
			if ev.Object.Metadata.Name == marker {
				// The marker is the last change: everything before it has arrived.
				s.markers++
				return
			}
		}
	}()
	return s
}

func podOn(node string, i int) *controlplane.GroupMember {
	return &controlplane.GroupMember{
		Pod: &controlplane.PodReference{Namespace: "ns", Name: fmt.Sprintf("%s-pod-%d", node, i)},
		IPs: []controlplane.IPAddress{{10, byte(len(node)), byte(i / 256), byte(i % 256)}},
	}
}

// withMember returns a copy of members (sorted as types.AppliedToGroup.Members,
// which are never modified once built) with m on node.
func withMember(members []types.NodeMember, node string, m *controlplane.GroupMember) []types.NodeMember {
	nm := types.NodeMember{Node: node, Key: controlplane.MemberKey(m), Member: m}
	i, found := slices.BinarySearchFunc(members, nm, types.CompareNodeMembers)
	if found {
		return members
	}
	out := make([]types.NodeMember, 0, len(members)+1)
	out = append(out, members[:i]...)
	out = append(out, nm)
	return append(out, members[i:]...)
}

// BenchmarkSpanOneAgentAmongHundred measures what the agent of node n0
// receives (events and bytes, through the real aggregated API) while pods are
// added on the 99 other nodes, at two scales ten times apart. Each node has
// its own policy, applied-to group and address group, and one cluster-wide
// applied-to group spans every node. Run with -benchtime=1x:
//
//	go test -run '^$' -bench SpanOneAgent -benchtime=1x ./pkg/apiserver/
func BenchmarkSpanOneAgentAmongHundred(b *testing.B) {
	for _, podsPerOtherNode := range []int{10, 100} {
		b.Run(fmt.Sprintf("pods-per-other-node=%d", podsPerOtherNode), func(b *testing.B) {
			h := startControlPlane(b)
			client, err := rest.HTTPClientFor(h.cp.Config)
			if err != nil {
				b.Fatal(err)
			}
			const nodes = 100
			for i := 0; i < b.N; i++ {
				r := spanRound(b, h, client, fmt.Sprintf("r%d", i), nodes, podsPerOtherNode)
				b.ReportMetric(float64(r.agent0Events), "events/agent0")
				b.ReportMetric(float64(r.agent0Bytes), "bytes/agent0")
				b.ReportMetric(float64(r.totalEvents), "events/all-agents")
				b.ReportMetric(float64(r.storeChanges), "store-changes")
			}
		})
	}
}

type spanResult struct {
	agent0Events, totalEvents int
	agent0Bytes               int64
	storeChanges              int
}

func spanRound(b *testing.B, h *harness, client *http.Client, round string, nodes, podsPerOtherNode int) spanResult {
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Minute)
	defer cancel()
	node := func(i int) string { return fmt.Sprintf("n%d", i) }
	marker := "marker-" + round
	resources := []string{"appliedtogroups", "addressgroups", "networkpolicies"}
	streams := make([][]*agentStream, nodes)
	for n := 0; n < nodes; n++ {
		for _, res := range resources {
			streams[n] = append(streams[n], watchRaw(ctx, client, h.cp.Config.Host, res, node(n), marker))
		}
	}
	// Let every watch open before the changes start, so none misses them.
	for deadline := time.Now().Add(time.Minute); ; {
		total := h.stores.AppliedToGroups.GetWatchersNum() + h.stores.AddressGroups.GetWatchersNum() + h.stores.NetworkPolicies.GetWatchersNum()
		if total == 3*nodes {
			break
		}
		if time.Now().After(deadline) {
			select {
			case <-streams[0][0].done:
				b.Fatalf("only %d of %d watches opened; node n0: %v", total, 3*nodes, streams[0][0].err)
			default:
			}
			b.Fatalf("only %d of %d watches opened", total, 3*nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.ResetTimer()
	changes := 0
	all := &types.AppliedToGroup{Name: "all-" + round, UID: "all", SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()}}
	atgs := map[int]*types.AppliedToGroup{}
	ags := map[int]*types.AddressGroup{}
	// Node n0 gets the same fixed share at every scale: 10 pods.
	podsOn := func(n int) int {
		if n == 0 {
			return 10
		}
		return podsPerOtherNode
	}
	for n := 0; n < nodes; n++ {
		name := fmt.Sprintf("%s-%s", node(n), round)
		atgs[n] = &types.AppliedToGroup{Name: "atg-" + name, UID: "atg", SpanMeta: types.SpanMeta{NodeNames: sets.New(node(n))}}
		ags[n] = &types.AddressGroup{Name: "ag-" + name, UID: "ag", SpanMeta: types.SpanMeta{NodeNames: sets.New(node(n))},
			GroupMembers: controlplane.GroupMemberSet{}}
		for _, err := range []error{h.stores.AppliedToGroups.Create(atgs[n]), h.stores.AddressGroups.Create(ags[n]),
			h.stores.NetworkPolicies.Create(&types.NetworkPolicy{Name: "np-" + name, UID: "np", Generation: 1,
				SpanMeta: types.SpanMeta{NodeNames: sets.New(node(n))}, AppliedToGroups: []string{"atg-" + name},
				Rules: []controlplane.NetworkPolicyRule{{Direction: controlplane.DirectionIn,
					From: controlplane.NetworkPolicyPeer{AddressGroups: []string{"ag-" + name}}}}})} {
			if err != nil {
				b.Fatal(err)
			}
			changes++
		}
	}
	if err := h.stores.AppliedToGroups.Create(all); err != nil {
		b.Fatal(err)
	}
	changes++
	// Pods arrive one at a time, as the computation would apply them.
	for i := 0; i < podsPerOtherNode || i < 10; i++ {
		for n := 0; n < nodes; n++ {
			if i >= podsOn(n) {
				continue
			}
			p := podOn(node(n), i)
			atg := *atgs[n]
			atg.Members = withMember(atgs[n].Members, node(n), p)
			ag := *ags[n]
			ag.GroupMembers = ags[n].GroupMembers.Union(controlplane.NewGroupMemberSet(p))
			next := *all
			next.SpanMeta = types.SpanMeta{NodeNames: all.NodeNames.Clone().Insert(node(n))}
			next.Members = withMember(all.Members, node(n), p)
			for _, err := range []error{h.stores.AppliedToGroups.Update(&atg), h.stores.AddressGroups.Update(&ag), h.stores.AppliedToGroups.Update(&next)} {
				if err != nil {
					b.Fatal(err)
				}
				changes++
			}
			atgs[n], ags[n], all = &atg, &ag, &next
		}
	}
	everyNode := sets.New[string]()
	for n := 0; n < nodes; n++ {
		everyNode.Insert(node(n))
	}
	for _, err := range []error{
		h.stores.AppliedToGroups.Create(&types.AppliedToGroup{Name: marker, SpanMeta: types.SpanMeta{NodeNames: everyNode}}),
		h.stores.AddressGroups.Create(&types.AddressGroup{Name: marker, SpanMeta: types.SpanMeta{NodeNames: everyNode}}),
		h.stores.NetworkPolicies.Create(&types.NetworkPolicy{Name: marker, SpanMeta: types.SpanMeta{NodeNames: everyNode}}),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	var res spanResult
	res.storeChanges = changes
	var errs []string
	var mu sync.Mutex
	for n := 0; n < nodes; n++ {
		for _, s := range streams[n] {
			<-s.done
			mu.Lock()
			if s.err != nil || s.markers != 1 {
				errs = append(errs, fmt.Sprintf("node %s: %v (markers %d)", node(n), s.err, s.markers))
			}
			// The marker itself is not part of the workload.
			res.totalEvents += s.events - 1
			if n == 0 {
				res.agent0Events += s.events - 1
				res.agent0Bytes += s.bytes
			}
			mu.Unlock()
		}
	}
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatalf("%d streams failed: %s", len(errs), strings.Join(errs[:min(5, len(errs))], "; "))
	}
	return res
}
