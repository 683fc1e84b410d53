package conformance

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/generator"

	"antrea.io/antrea/test/labtest"
)

// caseTimeout bounds one case: its actions, pod start-ups and every step's
// probing (each step at most realizeTimeout plus a confirmation matrix).
const caseTimeout = 4 * time.Minute

// testCase is a case whose actions may depend on the pods' current IPs
// (ipBlock peers), so it is built after the model is reset.
type testCase struct {
	name  string
	build func(pods map[string]peer) *generator.TestCase
	// newIP lists pods that the case re-creates and that must come back
	// with another address, or the case would not test what it claims.
	newIP []string
}

// fixed wraps a case that does not depend on the pods.
func fixed(tc *generator.TestCase) testCase {
	return testCase{name: tc.Description, build: func(map[string]peer) *generator.TestCase { return tc }}
}

// runCases runs each case as a subtest, on the base model reset before each.
func runCases(t *testing.T, cases []testCase) {
	t.Helper()
	filter := os.Getenv(envCase)
	for _, tc := range cases {
		if filter != "" && !strings.Contains(tc.name, filter) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			c := setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			peers, err := c.peers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			byKey := map[string]peer{}
			for _, p := range peers {
				byKey[p.key()] = p
			}
			runCase(t, c, tc.build(byKey))
			if len(tc.newIP) == 0 || t.Failed() {
				return
			}
			after, err := c.peers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range after {
				if slices.Contains(tc.newIP, p.key()) {
					if p.IP == byKey[p.key()].IP {
						t.Errorf("pod %s was re-created with its old IP %s; the case needs a new one", p.key(), p.IP)
					} else {
						t.Logf("pod %s was re-created: IP %s -> %s", p.key(), byKey[p.key()].IP, p.IP)
					}
				}
			}
		})
	}
}

// runCase applies each step's actions and checks that the lab's matrix equals
// the oracles' for the state after the step.
func runCase(t *testing.T, c *cluster, tc *generator.TestCase) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	list := labtest.ControlplaneLister(c.e.Client)
	for i, step := range tc.Steps {
		policies, err := c.policies(ctx)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		before, err := labtest.SnapshotPolicies(ctx, policies, list)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		for _, a := range step.Actions {
			if err := c.apply(ctx, a); err != nil {
				t.Fatalf("step %d: %v", i+1, err)
			}
		}
		if err := c.waitPodsReady(ctx); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		waitStepRealized(ctx, t, c, i+1, list, before)
		checkStep(ctx, t, c, i+1)
	}
}

// waitStepRealized waits until the step's policies are realized on every
// Node of their spans (labtest.WaitRealized) before any probe: a matrix
// probed earlier could equal the expectation only because the previous
// state agrees with it. A policy not realized in time fails the step; its
// matrix is still probed, to show what the datapath does.
func waitStepRealized(ctx context.Context, t *testing.T, c *cluster, step int, list labtest.CPLister, before labtest.PolicySnapshot) {
	t.Helper()
	after, err := c.policies(ctx)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	start := time.Now()
	notes, err := labtest.WaitRealized(ctx, labtest.DefaultRealizationWait(), list, before, after, c.namespaces)
	for _, n := range notes {
		t.Logf("step %d: %s", step, n)
	}
	if err != nil {
		t.Errorf("step %d: the step's NetworkPolicies are %v", step, err)
		return
	}
	t.Logf("step %d: %d NetworkPolicies realized on every Node of their spans after %.1fs", step, len(after), time.Since(start).Seconds())
}

// checkStep compares the lab with the oracles for the current state.
func checkStep(ctx context.Context, t *testing.T, c *cluster, step int) {
	t.Helper()
	peers, err := c.peers(ctx)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	policies, err := c.policies(ctx)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	exp := expect(ctx, peers, policies)
	for _, d := range exp.Disagreements {
		t.Errorf("step %d: the oracles disagree: %s", step, d)
	}
	all := cells(peers)
	start := time.Now()
	obs, rounds := newProber(peers).probeUntil(ctx, all, exp.Allowed)
	bad := mismatches(all, obs, exp.Allowed)
	allowed := 0
	for _, c := range all {
		if exp.Allowed[c] {
			allowed++
		}
	}
	if len(bad) == 0 {
		t.Logf("step %d: all %d probes equal the oracle (%d allowed, %d denied) after %d probe rounds in %.1fs",
			step, len(all), allowed, len(all)-allowed, rounds, time.Since(start).Seconds())
		return
	}
	t.Errorf("step %d: %d of %d probes differ from the oracle after %s (lab runtime %s)\n%s\n%s\n\nflows of the involved pods:\n%s",
		step, len(bad), len(all), realizeTimeout, c.e.Opts.Runtime,
		describeMismatches(bad, obs, exp.Allowed), renderMatrices(peers, obs, exp.Allowed),
		c.e.flowsOfInvolvedPods(ctx, peers, bad))
}
