package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// cache holds this node's slice of the computed policy.
type cache struct {
	policies        map[string]*cpv1beta2.NetworkPolicy
	addressGroups   map[string]map[string]cpv1beta2.GroupMember
	appliedToGroups map[string]map[string]cpv1beta2.GroupMember
}

func newCache() *cache {
	return &cache{
		policies:        map[string]*cpv1beta2.NetworkPolicy{},
		addressGroups:   map[string]map[string]cpv1beta2.GroupMember{},
		appliedToGroups: map[string]map[string]cpv1beta2.GroupMember{},
	}
}

// memberKey identifies a member: its pod, else its addresses.
func memberKey(m *cpv1beta2.GroupMember) string {
	if m.Pod != nil {
		return "pod:" + m.Pod.Namespace + "/" + m.Pod.Name
	}
	if m.Node != nil {
		return "node:" + m.Node.Name
	}
	ips := make([]string, 0, len(m.IPs))
	for _, ip := range m.IPs {
		ips = append(ips, net.IP(ip).String())
	}
	sort.Strings(ips)
	return "ips:" + strings.Join(ips, ",")
}

func memberMap(ms []cpv1beta2.GroupMember) map[string]cpv1beta2.GroupMember {
	out := make(map[string]cpv1beta2.GroupMember, len(ms))
	for i := range ms {
		out[memberKey(&ms[i])] = ms[i]
	}
	return out
}

func patchMembers(have map[string]cpv1beta2.GroupMember, added, removed []cpv1beta2.GroupMember) {
	for i := range removed {
		delete(have, memberKey(&removed[i]))
	}
	for i := range added {
		have[memberKey(&added[i])] = added[i]
	}
}

func (c *cache) policiesUsing(group string, addressGroup bool) sets.Set[string] {
	out := sets.New[string]()
	for name, p := range c.policies {
		if usesGroup(p, group, addressGroup) {
			out.Insert(name)
		}
	}
	return out
}

func usesGroup(p *cpv1beta2.NetworkPolicy, g string, addressGroup bool) bool {
	if !addressGroup {
		for _, n := range p.AppliedToGroups {
			if n == g {
				return true
			}
		}
	}
	for _, r := range p.Rules {
		var names []string
		if addressGroup {
			names = append(append(names, r.From.AddressGroups...), r.To.AddressGroups...)
		} else {
			names = r.AppliedToGroups
		}
		for _, n := range names {
			if n == g {
				return true
			}
		}
	}
	return false
}

// policiesForPod are the policies applied to a pod through any group.
func (c *cache) policiesForPod(ns, name string) sets.Set[string] {
	out := sets.New[string]()
	key := "pod:" + ns + "/" + name
	for g, members := range c.appliedToGroups {
		if _, ok := members[key]; ok {
			out = out.Union(c.policiesUsing(g, false))
		}
	}
	// An egress peer on this node may be a new pod too; address groups
	// carry IPs, so they are already complete without the interface.
	return out
}

// watcher lists and watches one resource with nodeName=<this node>, applying
// events to the cache and enqueueing the policies they affect. After an error
// it lists again and replaces its part of the cache, which marks as changed
// only what differs.
type watcher struct {
	c       *Controller
	kind    string
	list    func(ctx context.Context, opts metav1.ListOptions) ([]runtime.Object, string, error)
	watch   func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	replace func(objs []runtime.Object) sets.Set[string]
	apply   func(ev watch.Event) (sets.Set[string], error)
}

func (w *watcher) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	listedOnce := false
	for ctx.Err() == nil {
		if err := w.listAndWatch(ctx, &listedOnce); err != nil && ctx.Err() == nil {
			klog.InfoS("Watch of controlplane resource ended; listing again", "resource", w.kind, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			if backoff < 5*time.Second {
				backoff *= 2
			}
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

func (w *watcher) listAndWatch(ctx context.Context, listedOnce *bool) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("nodeName", w.c.nodeName).String()}
	objs, rv, err := w.list(ctx, opts)
	if err != nil {
		return fmt.Errorf("list %s: %w", w.kind, err)
	}
	w.c.mu.Lock()
	affected := w.replace(objs)
	w.c.mu.Unlock()
	w.c.enqueue(affected)
	if !*listedOnce {
		*listedOnce = true
		w.c.markListed(w.kind)
	}
	opts.ResourceVersion = rv
	opts.AllowWatchBookmarks = true
	wi, err := w.watch(ctx, opts)
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.kind, err)
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return fmt.Errorf("watch %s closed", w.kind)
			}
			switch ev.Type {
			case watch.Bookmark:
				continue
			case watch.Error:
				return fmt.Errorf("watch %s: %v", w.kind, ev.Object)
			}
			w.c.mu.Lock()
			affected, err := w.apply(ev)
			w.c.mu.Unlock()
			if err != nil {
				klog.ErrorS(err, "Unexpected controlplane event", "resource", w.kind, "type", ev.Type)
				continue
			}
			w.c.enqueue(affected)
		}
	}
}

func (c *Controller) watchers() []*watcher {
	cp := c.client.ControlplaneV1beta2()
	return []*watcher{
		{
			c: c, kind: "networkpolicies",
			list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
				l, err := cp.NetworkPolicies().List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				return objects(l.Items), l.ResourceVersion, nil
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.NetworkPolicies().Watch(ctx, o)
			},
			replace: func(objs []runtime.Object) sets.Set[string] {
				affected := sets.New[string]()
				seen := sets.New[string]()
				for _, o := range objs {
					p := o.(*cpv1beta2.NetworkPolicy)
					seen.Insert(p.Name)
					if old, ok := c.cache.policies[p.Name]; !ok || old.Generation != p.Generation || old.ResourceVersion != p.ResourceVersion {
						affected.Insert(p.Name)
					}
					c.cache.policies[p.Name] = p
				}
				for name := range c.cache.policies {
					if !seen.Has(name) {
						delete(c.cache.policies, name)
						affected.Insert(name)
					}
				}
				return affected
			},
			apply: func(ev watch.Event) (sets.Set[string], error) {
				p, ok := ev.Object.(*cpv1beta2.NetworkPolicy)
				if !ok {
					return nil, fmt.Errorf("object %T", ev.Object)
				}
				if ev.Type == watch.Deleted {
					delete(c.cache.policies, p.Name)
				} else {
					c.cache.policies[p.Name] = p
				}
				return sets.New(p.Name), nil
			},
		},
		c.groupWatcher("addressgroups", true),
		c.groupWatcher("appliedtogroups", false),
	}
}

// groupWatcher watches AddressGroups or AppliedToGroups: full objects on
// ADDED, patches of members on MODIFIED.
func (c *Controller) groupWatcher(kind string, address bool) *watcher {
	cp := c.client.ControlplaneV1beta2()
	groups := func() map[string]map[string]cpv1beta2.GroupMember {
		if address {
			return c.cache.addressGroups
		}
		return c.cache.appliedToGroups
	}
	return &watcher{
		c: c, kind: kind,
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			if address {
				l, err := cp.AddressGroups().List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				return objects(l.Items), l.ResourceVersion, nil
			}
			l, err := cp.AppliedToGroups().List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return objects(l.Items), l.ResourceVersion, nil
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if address {
				return cp.AddressGroups().Watch(ctx, o)
			}
			return cp.AppliedToGroups().Watch(ctx, o)
		},
		replace: func(objs []runtime.Object) sets.Set[string] {
			gs := groups()
			affected := sets.New[string]()
			seen := sets.New[string]()
			for _, o := range objs {
				name, members := groupOf(o)
				seen.Insert(name)
				mm := memberMap(members)
				if old, ok := gs[name]; !ok || !sameMembers(old, mm) {
					affected = affected.Union(c.cache.policiesUsing(name, address))
				}
				gs[name] = mm
			}
			for name := range gs {
				if !seen.Has(name) {
					delete(gs, name)
					affected = affected.Union(c.cache.policiesUsing(name, address))
				}
			}
			return affected
		},
		apply: func(ev watch.Event) (sets.Set[string], error) {
			gs := groups()
			var name string
			patch := func(added, removed []cpv1beta2.GroupMember) {
				if gs[name] == nil {
					gs[name] = map[string]cpv1beta2.GroupMember{}
				}
				patchMembers(gs[name], added, removed)
			}
			switch o := ev.Object.(type) {
			case *cpv1beta2.AddressGroupPatch:
				name = o.Name
				patch(o.AddedGroupMembers, o.RemovedGroupMembers)
			case *cpv1beta2.AppliedToGroupPatch:
				name = o.Name
				patch(o.AddedGroupMembers, o.RemovedGroupMembers)
			default:
				var members []cpv1beta2.GroupMember
				name, members = groupOf(ev.Object)
				if name == "" {
					return nil, fmt.Errorf("object %T", ev.Object)
				}
				if ev.Type == watch.Deleted {
					delete(gs, name)
				} else {
					gs[name] = memberMap(members)
				}
			}
			return c.cache.policiesUsing(name, address), nil
		},
	}
}

// objects returns pointers to a list's items as runtime.Objects.
func objects[T any, PT interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

func groupOf(o runtime.Object) (string, []cpv1beta2.GroupMember) {
	switch g := o.(type) {
	case *cpv1beta2.AddressGroup:
		return g.Name, g.GroupMembers
	case *cpv1beta2.AppliedToGroup:
		return g.Name, g.GroupMembers
	}
	return "", nil
}

func sameMembers(a, b map[string]cpv1beta2.GroupMember) bool {
	if len(a) != len(b) {
		return false
	}
	for k, m := range a {
		n, ok := b[k]
		if !ok || fmt.Sprint(m) != fmt.Sprint(n) {
			return false
		}
	}
	return true
}
