package openflow

import (
	"context"
	"slices"
	"sync"
)

// RuleWriter programs policy rules one at a time, remembering the version
// of each rule it installed and the ports it isolated: for tools and tests
// that drive the policy tables without the reconciler, which keeps that
// record itself and sends whole PolicyChanges.
type RuleWriter struct {
	c        *Client
	mu       sync.Mutex
	rules    map[uint32]*PolicyRule
	isolated [2][]uint32
}

// NewRuleWriter returns a RuleWriter on c.
func NewRuleWriter(c *Client) *RuleWriter {
	return &RuleWriter{c: c, rules: map[uint32]*PolicyRule{}}
}

// Install installs a rule or takes it to this version.
func (w *RuleWriter) Install(ctx context.Context, r *PolicyRule) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.c.ApplyPolicyChange(ctx, PolicyChange{Rules: []RuleChange{{Old: w.rules[r.ID], New: r}}}); err != nil {
		return err
	}
	w.rules[r.ID] = r
	return nil
}

// Uninstall removes a rule; unknown ids are a no-op.
func (w *RuleWriter) Uninstall(ctx context.Context, id uint32) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.c.ApplyPolicyChange(ctx, PolicyChange{Rules: []RuleChange{{Old: w.rules[id]}}}); err != nil {
		return err
	}
	delete(w.rules, id)
	return nil
}

// SetIsolatedPorts makes exactly these ports isolated for a direction.
func (w *RuleWriter) SetIsolatedPorts(ctx context.Context, d Direction, ports []uint32) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ch PolicyChange
	for _, p := range ports {
		if !slices.Contains(w.isolated[d], p) {
			ch.Isolate[d] = append(ch.Isolate[d], p)
		}
	}
	for _, p := range w.isolated[d] {
		if !slices.Contains(ports, p) {
			ch.Release[d] = append(ch.Release[d], p)
		}
	}
	if _, err := w.c.ApplyPolicyChange(ctx, ch); err != nil {
		return err
	}
	w.isolated[d] = slices.Clone(ports)
	return nil
}
