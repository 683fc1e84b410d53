package admission

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// An ed25519 host key in SSH wire format (ssh-keygen -t ed25519; base64 of
// the .pub file's second field).
const hostKeyBase64 = "AAAAC3NzaC1lZDI1NTE5AAAAIJpVq7O9Hh4l0k5N9XkS2m3p8e1i4o3n5b6v7c8x9z0a"

func sbc(mutate func(*crdv1alpha1.SupportBundleCollectionSpec)) *crdv1alpha1.SupportBundleCollection {
	s := &crdv1alpha1.SupportBundleCollection{ObjectMeta: metav1.ObjectMeta{Name: "support-bundle-for-nodes"},
		Spec: crdv1alpha1.SupportBundleCollectionSpec{
			Nodes:             &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1"}},
			ExpirationMinutes: 10, SinceTime: "2h",
			FileServer: crdv1alpha1.BundleFileServer{URL: "sftp://yourtestdomain.com:22/root/test"},
			Authentication: crdv1alpha1.BundleServerAuthConfiguration{AuthType: crdv1alpha1.BasicAuthentication,
				AuthSecret: &corev1.SecretReference{Name: "support-bundle-secret", Namespace: "default"}},
		}}
	if mutate != nil {
		mutate(&s.Spec)
	}
	return s
}

func TestValidSupportBundleCollectionsAreAccepted(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString(hostKeyBase64)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*crdv1alpha1.SupportBundleCollectionSpec){
		"upstream's Nodes example": nil,
		"upstream's ExternalNodes example (no scheme, no sinceTime)": func(s *crdv1alpha1.SupportBundleCollectionSpec) {
			s.Nodes, s.SinceTime, s.ExpirationMinutes = nil, "", 60
			s.ExternalNodes = &crdv1alpha1.BundleExternalNodes{Namespace: "vm-ns", NodeNames: []string{"vm1"},
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "vms"}}}
			s.FileServer.URL = "yourtestdomain.com:22/root/test"
		},
		"every Node, days, a host key": func(s *crdv1alpha1.SupportBundleCollectionSpec) {
			s.Nodes, s.SinceTime, s.FileServer.HostPublicKey = &crdv1alpha1.BundleNodes{}, "1d", key
		},
	} {
		if errs := ValidateSupportBundleCollection(context.Background(), sbc(mutate)); len(errs) != 0 {
			t.Errorf("%s refused: %v", name, errs)
		}
	}
}

func TestInvalidSupportBundleCollectionsAreRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*crdv1alpha1.SupportBundleCollectionSpec)
		field  string
	}{
		{"no nodes form", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.Nodes = nil }, "spec.nodes"},
		{"a bad selector", func(s *crdv1alpha1.SupportBundleCollectionSpec) {
			s.Nodes.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Near"}}}
		}, "spec.nodes.nodeSelector"},
		{"a bad label value", func(s *crdv1alpha1.SupportBundleCollectionSpec) {
			s.Nodes.MatchLabels = map[string]string{"role": "two words"}
		}, "spec.nodes.matchLabels"},
		{"external Nodes without a Namespace", func(s *crdv1alpha1.SupportBundleCollectionSpec) {
			s.ExternalNodes = &crdv1alpha1.BundleExternalNodes{}
		}, "spec.externalNodes.namespace"},
		{"expirationMinutes 0", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.ExpirationMinutes = 0 }, "spec.expirationMinutes"},
		{"a sinceTime that is no duration", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.SinceTime = "yesterday" }, "spec.sinceTime"},
		{"a negative sinceTime", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.SinceTime = "-2h" }, "spec.sinceTime"},
		{"an https URL", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.FileServer.URL = "https://files.example:443/up" }, "spec.fileServer.url"},
		{"a URL without a port", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.FileServer.URL = "sftp://files.example/up" }, "spec.fileServer.url"},
		{"a host key that is none", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.FileServer.HostPublicKey = []byte("not a key") }, "spec.fileServer.hostPublicKey"},
		{"a bearer token", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.Authentication.AuthType = crdv1alpha1.BearerToken }, "spec.authentication.authType"},
		{"no authSecret", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.Authentication.AuthSecret = nil }, "spec.authentication.authSecret"},
		{"an authSecret without a Namespace", func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.Authentication.AuthSecret.Namespace = "" }, "spec.authentication.authSecret.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateSupportBundleCollection(context.Background(), sbc(tc.mutate))
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors = %v, want one naming %s", errs, tc.field)
			}
		})
	}
}

func TestAURLWithCredentialsIsRefusedWithoutEchoingThem(t *testing.T) {
	errs := ValidateSupportBundleCollection(context.Background(), sbc(func(s *crdv1alpha1.SupportBundleCollectionSpec) {
		s.FileServer.URL = "sftp://bundles:hunter2@files.example:22/up"
	}))
	if len(errs) != 1 || errs[0].Field != "spec.fileServer.url" || strings.Contains(errs.ToAggregate().Error(), "hunter2") {
		t.Errorf("errors = %v, want one naming spec.fileServer.url without the password", errs)
	}
}

// TestTheWebhookRefusesASpecChangeButNotALabel: through the handler, as
// kube-apiserver calls it, with the old object.
func TestTheWebhookRefusesASpecChangeButNotALabel(t *testing.T) {
	h := Handlers(NewValidator(newFakeLookup(), controllerUser))[PathValidateSBC]
	old := sbc(nil)
	review := func(obj *crdv1alpha1.SupportBundleCollection) *admissionv1.AdmissionResponse {
		raw, _ := json.Marshal(obj)
		oldRaw, _ := json.Marshal(old)
		body, _ := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update,
				Kind:   metav1.GroupVersionKind{Group: "crd.antrea.io", Version: "v1alpha1", Kind: "SupportBundleCollection"},
				Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathValidateSBC, bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("not an AdmissionReview: %v: %s", err, rec.Body)
		}
		return out.Response
	}
	changed := sbc(func(s *crdv1alpha1.SupportBundleCollectionSpec) { s.ExpirationMinutes = 30 })
	if resp := review(changed); resp.Allowed || !strings.Contains(resp.Result.Message, "spec: Forbidden") {
		t.Errorf("a spec change: %+v, want refused naming spec", resp)
	}
	labelled := sbc(nil)
	labelled.Labels = map[string]string{"ticket": "42"}
	if resp := review(labelled); !resp.Allowed {
		t.Errorf("a label added: refused %v", resp.Result)
	}
	if resp := reviewWith(t, h, admissionv1.Create, "SupportBundleCollection", sbc(func(s *crdv1alpha1.SupportBundleCollectionSpec) {
		s.ExpirationMinutes = 0
	})); resp.Allowed || !strings.Contains(resp.Result.Message, "spec.expirationMinutes") {
		t.Errorf("a create with expirationMinutes 0: %+v, want refused naming the field", resp)
	}
}
