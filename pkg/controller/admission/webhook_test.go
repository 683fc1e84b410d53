package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// review posts an AdmissionReview for obj to the handler at path, as
// kube-apiserver does, and returns the response.
func review(t *testing.T, path string, op admissionv1.Operation, kind string, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	return reviewWith(t, Handlers(NewValidator(newFakeLookup(), controllerUser))[path], op, kind, obj)
}

// reviewWith posts an AdmissionReview for obj to h and returns the response.
func reviewWith(t *testing.T, h http.Handler, op admissionv1.Operation, kind string, obj any) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{UID: types.UID("uid-1"), Kind: metav1.GroupVersionKind{Group: "crd.antrea.io", Version: "v1beta1", Kind: kind},
		Operation: op, Object: runtime.RawExtension{Raw: raw}}
	if op == admissionv1.Delete {
		req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{Raw: raw}
	}
	return postReview(t, h, req)
}

// reviewUpdateWith posts the AdmissionReview of an UPDATE of old to obj.
func reviewUpdateWith(t *testing.T, h http.Handler, kind string, obj, old any) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	oldRaw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	return postReview(t, h, &admissionv1.AdmissionRequest{UID: types.UID("uid-1"),
		Kind:      metav1.GroupVersionKind{Group: "crd.antrea.io", Version: "v1alpha1", Kind: kind},
		Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: oldRaw}})
}

func postReview(t *testing.T, h http.Handler, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	const path = "/validate"
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req}
	body, _ := json.Marshal(&ar)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("not an AdmissionReview response: %v: %s", err, rec.Body)
	}
	if out.Response.UID != "uid-1" {
		t.Errorf("the response's UID is %q, want the request's", out.Response.UID)
	}
	return out.Response
}

func TestTheValidatingWebhookAnswersKubeAPIServer(t *testing.T) {
	t.Run("a valid policy is allowed", func(t *testing.T) {
		if resp := review(t, PathValidateACNP, admissionv1.Create, "ClusterNetworkPolicy", goodACNP()); !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
	})
	t.Run("an invalid policy is refused with each field named, as Invalid", func(t *testing.T) {
		p := goodACNP()
		p.Spec.Priority = 0
		p.Spec.Tier = "baseline"
		p.Spec.Ingress[0].Action = action(crdv1beta1.RuleActionPass)
		resp := review(t, PathValidateACNP, admissionv1.Update, "ClusterNetworkPolicy", p)
		if resp.Allowed || resp.Result == nil || resp.Result.Reason != metav1.StatusReasonInvalid || resp.Result.Code != 422 {
			t.Fatalf("want refused as Invalid (422), got %+v", resp)
		}
		for _, f := range []string{"spec.priority", "spec.ingress[0].action"} {
			if !strings.Contains(resp.Result.Message, f) {
				t.Errorf("the message does not name %s: %s", f, resp.Result.Message)
			}
		}
	})
	t.Run("deleting a static Tier is refused", func(t *testing.T) {
		tier := &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "baseline"}, Spec: crdv1beta1.TierSpec{Priority: 253}}
		if resp := review(t, PathValidateTier, admissionv1.Delete, "Tier", tier); resp.Allowed {
			t.Fatal("allowed")
		}
	})
	t.Run("an Antrea NetworkPolicy takes the request's Namespace", func(t *testing.T) {
		p := &crdv1beta1.NetworkPolicy{Spec: crdv1beta1.NetworkPolicySpec{Priority: 1,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: selector()}},
			Ingress:   []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop), From: []crdv1beta1.NetworkPolicyPeer{{Group: "nosuch"}}}}}}
		resp := review(t, PathValidateANNP, admissionv1.Create, "NetworkPolicy", p)
		if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.ingress[0].from[0].group") {
			t.Fatalf("want refused naming the group, got %+v", resp.Result)
		}
	})
}

func TestTheMutatingWebhookFillsInUpstreamsDefaults(t *testing.T) {
	p := goodACNP()
	p.Spec.Tier = ""
	p.Spec.Egress[0].Name = ""
	resp := review(t, PathMutateACNP, admissionv1.Create, "ClusterNetworkPolicy", p)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("want allowed with a JSON patch, got %+v", resp)
	}
	var ops []patchOp
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	want := []patchOp{
		{Op: "add", Path: "/spec/tier", Value: "application"},
		{Op: "add", Path: "/spec/egress/0/name", Value: GeneratedRuleName("egress", p.Spec.Egress[0])},
	}
	got, _ := json.Marshal(ops)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Fatalf("patch %s, want %s", got, wantJSON)
	}
	if name := want[1].Value.(string); !strings.HasPrefix(name, "egress-drop-") || len(name) != len("egress-drop-")+7 {
		t.Errorf("generated name %q, want egress-drop-<7 hex digits>", name)
	}

	p.Spec.Tier, p.Spec.Egress[0].Name = "securityops", "named"
	if resp := review(t, PathMutateACNP, admissionv1.Create, "ClusterNetworkPolicy", p); len(resp.Patch) != 0 {
		t.Errorf("a policy with a tier and named rules was patched: %s", resp.Patch)
	}
}

func TestGeneratedRuleNamesAreUpstreams(t *testing.T) {
	// The name upstream's mutating webhook gives this rule (its sha1 over
	// the same JSON).
	r := crdv1beta1.Rule{Action: action(crdv1beta1.RuleActionAllow)}
	data, _ := json.Marshal(r)
	if string(data) != `{"action":"Allow","enableLogging":false}` {
		t.Fatalf("a rule marshals as %s: the JSON upstream hashes differs", data)
	}
	// printf '%s' '{"action":"Allow","enableLogging":false}' | sha1sum
	if got, want := GeneratedRuleName("ingress", r), "ingress-allow-216bba8"; got != want {
		t.Fatalf("GeneratedRuleName = %q, want %q", got, want)
	}
}
