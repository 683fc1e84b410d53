package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// withoutSelectors asks the delegated authorizer about a request with its
// field and label selectors left out. Since Kubernetes 1.34 the
// SubjectAccessReview of a list or watch carries its selectors, and the
// delegated authorizer caches decisions by the whole review: every agent's
// nodeName=<node> made one review per Node and per resource, 3,000 at once
// when 1,000 agents (re)connect, some of which timed out and were answered
// forbidden (docs/scale.md). Without them the review is the same for every
// agent (user, verb, resource) and is answered once per cache period. A
// selector only narrows a request and RBAC grants on verb and resource, so
// under RBAC the decision is the same; an authorizer that grants per
// selector (which would restrict an agent to its own nodeName) sees the
// wider request and must grant it whole.
//
// Identical reviews asked at the same moment are asked once
// (singleflight): the delegated authorizer's cache only helps once a first
// answer is in, and agents dialing the controller directly all arrive at
// once when they start or the controller restarts (1,000 agents: 3,000
// identical reviews in flight, which timed out at kube-apiserver).
type withoutSelectors struct {
	authorizer.Authorizer
	inflight *singleflight.Group
}

func newWithoutSelectors(a authorizer.Authorizer) withoutSelectors {
	return withoutSelectors{Authorizer: a, inflight: &singleflight.Group{}}
}

type decision struct {
	d      authorizer.Decision
	reason string
}

func (w withoutSelectors) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	v, err, _ := w.inflight.Do(reviewKey(a), func() (any, error) {
		// Not the first caller's ctx: a waiter must not fail because the
		// first one went away.
		d, reason, err := w.Authorizer.Authorize(context.WithoutCancel(ctx), selectorless{a})
		return decision{d, reason}, err
	})
	dec, _ := v.(decision)
	return dec.d, dec.reason, err
}

// reviewKey is what the SubjectAccessReview of a (without its selectors)
// holds: the user (name, UID, groups, extra) and the request.
func reviewKey(a authorizer.Attributes) string {
	var b strings.Builder
	if u := a.GetUser(); u != nil {
		groups := append([]string(nil), u.GetGroups()...)
		sort.Strings(groups)
		extra := u.GetExtra()
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%q %q %q", u.GetName(), u.GetUID(), groups)
		for _, k := range keys {
			fmt.Fprintf(&b, " %q=%q", k, extra[k])
		}
	}
	fmt.Fprintf(&b, "|%t %q %q %q %q %q %q %q %q", a.IsResourceRequest(), a.GetVerb(), a.GetAPIGroup(), a.GetAPIVersion(),
		a.GetResource(), a.GetSubresource(), a.GetNamespace(), a.GetName(), a.GetPath())
	return b.String()
}

func (w withoutSelectors) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return w.Authorizer.ConditionsAwareAuthorize(ctx, selectorless{a})
}

// selectorless hides a request's selectors.
type selectorless struct {
	authorizer.Attributes
}

func (selectorless) GetFieldSelector() (fields.Requirements, error) { return nil, nil }
func (selectorless) GetLabelSelector() (labels.Requirements, error) { return nil, nil }
