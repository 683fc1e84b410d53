package apiserver

import (
	"context"
	"net/http"
	"strings"

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

// untilProxyCALoaded answers requests to the API groups with 503 and
// Retry-After until the request-header CA (which verifies kube-apiserver's
// proxy, kube-system/extension-apiserver-authentication) is loaded. Before
// it is, a request kube-apiserver proxies for an agent is taken as
// system:anonymous and refused (forbidden), and the agent backs off (up to
// 5 s); a 503 with Retry-After is retried by client-go after a second.
// Seen for about 2 s after each controller restart at 1,000 agents
// (docs/scale.md). Health and webhook paths are served as before.
func untilProxyCALoaded(h http.Handler, loaded func() []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/apis/") && len(loaded()) == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "antrea-controller is starting: the request-header CA of kube-system/extension-apiserver-authentication is not loaded yet",
				http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}
