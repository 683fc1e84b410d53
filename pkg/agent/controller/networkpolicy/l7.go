package networkpolicy

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/l7engine"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// L7Engine is the layer 7 engine as the policy controller drives it
// (l7engine.Engine): the rules by layer 7 id, and where its verdicts go.
type L7Engine interface {
	SetRules(map[uint16]*l7engine.Rule)
	SetReport(func(l7engine.Verdict))
}

// maxL7VLAN is the largest layer 7 id: a VLAN id (0 and 4095 are reserved
// by IEEE 802.1Q).
const maxL7VLAN = 4094

// l7Rules gives each Allow rule with l7Protocols of this node's policies a
// layer 7 id (its VLAN id on the engine's port) and keeps the engine's rule
// table equal to them. Ids are handed out in a cycle, so that an id freed
// is reused as late as possible (a connection keeps its id in its ct_mark).
type l7Rules struct {
	engine L7Engine

	mu    sync.Mutex
	ids   map[l7Key]uint16
	rules map[uint16]*l7engine.Rule
	last  uint16
}

// l7Key names a controlplane rule: its policy and index.
type l7Key struct {
	policy string
	index  int
}

func newL7Rules(engine L7Engine) *l7Rules {
	return &l7Rules{engine: engine, ids: map[l7Key]uint16{}, rules: map[uint16]*l7engine.Rule{}}
}

// l7Rule is the engine's form of a controlplane rule (nil without
// l7Protocols).
func l7Rule(p *cpv1beta2.NetworkPolicy, r *cpv1beta2.NetworkPolicyRule) *l7engine.Rule {
	if len(r.L7Protocols) == 0 {
		return nil
	}
	info := newRuleInfo(p, r)
	out := &l7engine.Rule{Policy: info.policy, Name: r.Name, Direction: ruleDirection(r).String(), LogLabel: r.LogLabel,
		Log: r.EnableLogging}
	for _, l := range r.L7Protocols {
		if l.HTTP != nil {
			out.HTTP = append(out.HTTP, l7engine.HTTPMatch{Host: l.HTTP.Host, Method: l.HTTP.Method, Path: l.HTTP.Path})
		}
		if l.TLS != nil {
			out.TLS = append(out.TLS, l7engine.TLSMatch{SNI: l.TLS.SNI})
		}
	}
	return out
}

// apply gives the layer 7 rules of a policy's desired state their ids
// (freeing those of rules gone), marks their PolicyRules with them, and hands the engine the new rule table (when it
// changed) before the flows that steer to it are written. Without an engine (l nil) a layer 7
// rule is left out: it matches nothing, and the rules after it decide.
func (l *l7Rules) apply(name string, want *desiredPolicy) {
	if l == nil {
		for k := range want.rules {
			if want.l7[ruleIndex(k)] != nil {
				klog.InfoS("Layer 7 rule not realized: the L7NetworkPolicy feature gate is off", "policy", name, "rule", want.infos[k].name)
				want.drop(k)
			}
		}
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for key, id := range l.ids {
		if key.policy == name && want.l7[key.index] == nil {
			delete(l.ids, key)
			delete(l.rules, id)
			changed = true
		}
	}
	for _, i := range slices.Sorted(maps.Keys(want.l7)) {
		key := l7Key{name, i}
		id, ok := l.ids[key]
		if !ok {
			if id = l.allocateLocked(); id == 0 {
				klog.InfoS("Layer 7 rule not realized: every layer 7 id is in use", "policy", name, "rule", want.l7[i].Name)
				continue
			}
			l.ids[key] = id
		}
		if !reflect.DeepEqual(l.rules[id], want.l7[i]) {
			l.rules[id] = want.l7[i]
			changed = true
		}
	}
	for k, r := range want.rules {
		i := ruleIndex(k)
		if want.l7[i] == nil {
			continue
		}
		id, ok := l.ids[l7Key{name, i}]
		if !ok {
			want.drop(k)
			continue
		}
		// A rule without ports selects every protocol: its TCP goes to
		// the engine, the rest is dropped (l7_policy.go), as upstream.
		r.L7VLAN = id
	}
	if changed {
		l.engine.SetRules(maps.Clone(l.rules))
	}
}

// drop leaves a rule out of a desired state.
func (d *desiredPolicy) drop(k string) {
	delete(d.rules, k)
	delete(d.orders, k)
	delete(d.infos, k)
}

// allocateLocked returns a free id after the last one given (0: none).
func (l *l7Rules) allocateLocked() uint16 {
	used := map[uint16]bool{}
	for _, id := range l.ids {
		used[id] = true
	}
	for n := 0; n < maxL7VLAN; n++ {
		l.last = l.last%maxL7VLAN + 1
		if !used[l.last] {
			return l.last
		}
	}
	return 0
}

// l7AuditEntry is the audit log line of an engine's verdict: the rule's
// line, with table L7Engine and action Allow or Reject, followed by what
// was decided on ("http <method> <host> <path>" or "tls <sni>").
func l7AuditEntry(v l7engine.Verdict) (*auditEntry, string) {
	e := &auditEntry{table: "L7Engine", policy: v.Rule.Policy, rule: v.Rule.Name, direction: v.Rule.Direction,
		action: "Reject", src: v.Client.Addr(), dst: v.Server.Addr(), srcPort: portString(v.Client.Port()),
		dstPort: portString(v.Server.Port()), protocol: "TCP", label: v.Rule.LogLabel}
	if v.Allowed {
		e.action = "Allow"
	}
	what := v.Protocol
	switch {
	case v.HTTP != nil:
		what = strings.Join([]string{"http", orNil(v.HTTP.Method), orNil(v.HTTP.Host), orNil(v.HTTP.Path)}, " ")
	case v.Protocol == "tls":
		what = "tls " + orNil(v.SNI)
	}
	return e, what
}

// l7Report writes the engine's verdicts to the audit log.
func l7Report(audit *auditLogger) func(l7engine.Verdict) {
	return func(v l7engine.Verdict) {
		e, what := l7AuditEntry(v)
		e.extra = what
		audit.log(e)
	}
}
