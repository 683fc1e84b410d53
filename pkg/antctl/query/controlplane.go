package query

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// The three computed resources of controlplane.antrea.io/v1beta2, listed
// without nodeName (every object with every member) or, for a Node, as that
// Node's agent sees them: the server evaluates nodeName=<node>
// (docs/design/controlplane-api.md).

// NodeNameField is the field selector the controlplane API evaluates.
const NodeNameField = "nodeName"

// maxConcurrentLists bounds the lists Spans makes at once.
const maxConcurrentLists = 8

// ListOptions selects what the agent of node receives; every object for "".
func ListOptions(node string) metav1.ListOptions {
	if node == "" {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(NodeNameField, node).String()}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: cpv1beta2.SchemeGroupVersion.String(), Kind: kind}
}

// listPolicies lists the policies node's agent receives (all for ""), by name.
func listPolicies(ctx context.Context, c *Clients, node string) ([]cpv1beta2.NetworkPolicy, error) {
	list, err := c.Antrea.ControlplaneV1beta2().NetworkPolicies().List(ctx, ListOptions(node))
	if err != nil {
		return nil, fmt.Errorf("listing networkpolicies: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		list.Items[i].TypeMeta = typeMeta("NetworkPolicy")
	}
	return list.Items, nil
}

// Spans returns, for every object list(node) returns for some Node, the
// Nodes it is sent to: the server's own span, asked Node by Node (what each
// agent watches), so no copy of the span computation is needed here.
func Spans(ctx context.Context, c *Clients, list func(ctx context.Context, node string) ([]string, error)) (map[string][]string, error) {
	nodes, err := NodeNames(ctx, c.Kube)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		out   = map[string][]string{}
		sem   = make(chan struct{}, maxConcurrentLists)
	)
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			names, err := list(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("node %s: %w", n, err)
				}
				return
			}
			for _, name := range names {
				out[name] = append(out[name], n)
			}
		}()
	}
	wg.Wait()
	for _, ns := range out {
		sort.Strings(ns)
	}
	return out, first
}

// SourceString is the policy's origin as the controller's table prints it
// (type:namespace/name).
func SourceString(p *cpv1beta2.NetworkPolicy) string {
	ref := p.SourceRef
	if ref == nil {
		return ""
	}
	if ref.Namespace == "" {
		return string(ref.Type) + ":" + ref.Name
	}
	return string(ref.Type) + ":" + ref.Namespace + "/" + ref.Name
}

// Priorities prints an Antrea-native policy's tier priority and priority,
// <none> for a K8s NetworkPolicy (evaluated between the application and
// baseline Tiers).
func Priorities(p *cpv1beta2.NetworkPolicy) (tier, priority string) {
	tier, priority = "<none>", "<none>"
	if p.TierPriority != nil {
		tier = strconv.Itoa(int(*p.TierPriority))
	}
	if p.Priority != nil {
		priority = strconv.FormatFloat(*p.Priority, 'g', -1, 64)
	}
	return tier, priority
}

func sourceNamespace(p *cpv1beta2.NetworkPolicy) string {
	if p.SourceRef == nil {
		return ""
	}
	return p.SourceRef.Namespace
}

// AppliedToGroupsOf lists the AppliedToGroups of a policy: its own and its rules'.
func AppliedToGroupsOf(p *cpv1beta2.NetworkPolicy) []string {
	s := sets.New(p.AppliedToGroups...)
	for _, r := range p.Rules {
		s.Insert(r.AppliedToGroups...)
	}
	return sets.List(s)
}

// AddressGroupsOf lists the AddressGroups of a policy's rules.
func AddressGroupsOf(p *cpv1beta2.NetworkPolicy) []string {
	s := sets.New[string]()
	for _, r := range p.Rules {
		s.Insert(r.From.AddressGroups...)
		s.Insert(r.To.AddressGroups...)
	}
	return sets.List(s)
}

func hasPod(members []cpv1beta2.GroupMember, ns, name string) bool {
	for _, m := range members {
		if m.Pod != nil && m.Pod.Namespace == ns && m.Pod.Name == name {
			return true
		}
	}
	return false
}

// MemberString names a group member: NS/POD, node/NAME, service/NS/NAME, or
// its addresses.
func MemberString(m cpv1beta2.GroupMember) string {
	switch {
	case m.Pod != nil:
		return m.Pod.Namespace + "/" + m.Pod.Name
	case m.Node != nil:
		return "node/" + m.Node.Name
	case m.Service != nil:
		return "service/" + m.Service.Namespace + "/" + m.Service.Name
	}
	return strings.Join(IPStrings(m.IPs), ",")
}

// IPStrings prints addresses.
func IPStrings(ips []cpv1beta2.IPAddress) []string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.IP(ip).String())
	}
	return out
}
