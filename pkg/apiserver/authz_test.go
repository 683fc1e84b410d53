package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

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
	a := withoutSelectors{rec}
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

func TestAPIRequestsWaitWithRetryAfterUntilTheProxyCAIsLoaded(t *testing.T) {
	var ca []byte
	served := 0
	h := untilProxyCALoaded(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }), func() []byte { return ca })
	for _, tt := range []struct {
		path       string
		loaded     bool
		wantStatus int
		wantServed bool
	}{
		{"/apis/controlplane.antrea.io/v1beta2/networkpolicies", false, http.StatusServiceUnavailable, false},
		{"/healthz", false, http.StatusOK, true},
		{"/validate/clusternetworkpolicy", false, http.StatusOK, true},
		{"/apis/controlplane.antrea.io/v1beta2/networkpolicies", true, http.StatusOK, true},
	} {
		if tt.loaded {
			ca = []byte("-----BEGIN CERTIFICATE-----")
		}
		served = 0
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if rec.Code != tt.wantStatus || (served == 1) != tt.wantServed {
			t.Errorf("%s (CA loaded %v): status %d, served %v; want %d, %v", tt.path, tt.loaded, rec.Code, served == 1, tt.wantStatus, tt.wantServed)
		}
		if rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: a 503 without Retry-After: 1 (%q)", tt.path, rec.Header().Get("Retry-After"))
		}
	}
}
