package apiserver

import (
	"context"

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
type withoutSelectors struct {
	authorizer.Authorizer
}

func (w withoutSelectors) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return w.Authorizer.Authorize(ctx, selectorless{a})
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
