package apiserver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// recorder answers Allow and keeps what it was asked.
type recorder struct{ asked []authorizer.Attributes }

func (r *recorder) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a)
	return authorizer.DecisionAllow, "ok", nil
}

func (r *recorder) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *recorder) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func TestTheDelegatedAuthorizerIsAskedWithoutTheAgentsNodeSelector(t *testing.T) {
	nodeName, err := fields.ParseSelector("nodeName=node-7")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a := newWithoutSelectors(rec)
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "system:serviceaccount:kube-system:antrea-agent"},
		Verb: "watch", APIGroup: "controlplane.antrea.io", APIVersion: "v1beta2", Resource: "networkpolicies",
		ResourceRequest: true, FieldSelectorRequirements: nodeName.Requirements()}
	if d, reason, err := a.Authorize(context.Background(), attrs); d != authorizer.DecisionAllow || reason != "ok" || err != nil {
		t.Errorf("decision %v %q %v, want the delegate's", d, reason, err)
	}
	_ = a.ConditionsAwareAuthorize(context.Background(), attrs)
	if len(rec.asked) != 2 {
		t.Fatalf("asked %d times, want 2", len(rec.asked))
	}
	for _, got := range rec.asked {
		fs, _ := got.GetFieldSelector()
		ls, _ := got.GetLabelSelector()
		if len(fs) != 0 || len(ls) != 0 {
			t.Errorf("the delegate saw selectors %v %v", fs, ls)
		}
		if got.GetUser().GetName() != attrs.User.GetName() || got.GetVerb() != "watch" || got.GetResource() != "networkpolicies" ||
			got.GetAPIGroup() != "controlplane.antrea.io" || !got.IsResourceRequest() {
			t.Errorf("the delegate saw %+v, want the request's user, verb and resource", got)
		}
	}
	// The request itself still carries its selector for the storage.
	if fs, _ := attrs.GetFieldSelector(); len(fs) != 1 || fs[0].Operator != selection.Equals || fs[0].Value != "node-7" {
		t.Errorf("the request's own selector changed: %v", fs)
	}
}

// gated answers Allow once released, counting the reviews it was asked.
type gated struct {
	recorder
	release chan struct{}
	calls   atomic.Int32
}

func (g *gated) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	g.calls.Add(1)
	<-g.release
	return authorizer.DecisionAllow, "ok " + a.GetUser().GetName(), nil
}

func TestIdenticalReviewsInFlightAreAskedOnce(t *testing.T) {
	g := &gated{release: make(chan struct{})}
	a := newWithoutSelectors(g)
	const agents = 100
	attrs := func(name, node string) authorizer.Attributes {
		sel, _ := fields.ParseSelector("nodeName=" + node)
		return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name, Groups: []string{"system:serviceaccounts"}},
			Verb: "list", APIGroup: "controlplane.antrea.io", APIVersion: "v1beta2", Resource: "appliedtogroups",
			ResourceRequest: true, FieldSelectorRequirements: sel.Requirements()}
	}
	var started, done sync.WaitGroup
	reasons := make([]string, agents+1)
	for i := 0; i <= agents; i++ {
		started.Add(1)
		done.Add(1)
		name := "system:serviceaccount:kube-system:antrea-agent"
		if i == agents {
			name = "system:serviceaccount:kube-system:other" // another review
		}
		go func() {
			defer done.Done()
			started.Done()
			d, reason, err := a.Authorize(context.Background(), attrs(name, "node-"+string(rune('a'+i%26))))
			if d != authorizer.DecisionAllow || err != nil {
				t.Errorf("decision %v %v, want the delegate's", d, err)
			}
			reasons[i] = reason
		}()
	}
	started.Wait()
	// Let the callers reach the review before it is answered.
	time.Sleep(200 * time.Millisecond)
	close(g.release)
	done.Wait()
	if n := g.calls.Load(); n < 2 || n > agents/2 {
		t.Errorf("the delegate was asked %d times for %d identical reviews and 1 other, want about 2", n, agents)
	}
	if reasons[0] != "ok system:serviceaccount:kube-system:antrea-agent" || reasons[agents] != "ok system:serviceaccount:kube-system:other" {
		t.Errorf("reasons %q and %q: each caller must get its own user's answer", reasons[0], reasons[agents])
	}
}
