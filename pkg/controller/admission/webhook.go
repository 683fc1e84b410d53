package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The paths kube-apiserver calls, named by the ValidatingWebhookConfiguration
// crdvalidator.antrea.io and the MutatingWebhookConfiguration
// crdmutator.antrea.io of build/charts/antrea (upstream's paths).
const (
	PathValidateTier          = "/validate/tier"
	PathValidateACNP          = "/validate/acnp"
	PathValidateANNP          = "/validate/annp"
	PathValidateClusterGroup  = "/validate/clustergroup"
	PathValidateGroup         = "/validate/group"
	PathValidatePacketCapture = "/validate/packetcapture"
	PathValidateNLM           = "/validate/nodelatencymonitor"
	PathValidateBGPPolicy     = "/validate/bgppolicy"
	PathMutateACNP            = "/mutate/acnp"
	PathMutateANNP            = "/mutate/annp"
)

// maxReviewBytes bounds the body of an AdmissionReview (kube-apiserver's own
// request limit is 3 MiB per object; a review holds two).
const maxReviewBytes = 8 << 20

// Handlers returns the webhook handlers by path.
func Handlers(v *Validator) map[string]http.Handler {
	return map[string]http.Handler{
		PathValidateTier:          reviewHandler(v.reviewTier),
		PathValidateACNP:          reviewHandler(reviewObject(v.ValidateClusterNetworkPolicy)),
		PathValidateANNP:          reviewHandler(reviewObject(v.ValidateNetworkPolicy)),
		PathValidateClusterGroup:  reviewHandler(reviewObject(v.ValidateClusterGroup)),
		PathValidateGroup:         reviewHandler(reviewObject(v.ValidateGroup)),
		PathValidatePacketCapture: reviewHandler(reviewSpecFixed(func(pc *crdv1alpha1.PacketCapture) any { return pc.Spec }, v.ValidatePacketCapture)),
		PathValidateNLM:           reviewHandler(reviewObject(v.ValidateNodeLatencyMonitor)),
		PathValidateSBC:           reviewHandler(reviewSpecFixed(func(s *crdv1alpha1.SupportBundleCollection) any { return s.Spec }, ValidateSupportBundleCollection)),
		PathValidateBGPPolicy:     reviewHandler(reviewObject(v.ValidateBGPPolicy)),
		PathMutateACNP:            reviewHandler(mutateACNP),
		PathMutateANNP:            reviewHandler(mutateANNP),
	}
}

type reviewFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// reviewHandler serves admission.k8s.io/v1 AdmissionReviews with review.
func reviewHandler(review reviewFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "an AdmissionReview is POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
		if err != nil || len(body) > maxReviewBytes {
			http.Error(w, "reading the AdmissionReview failed or it is too large", http.StatusBadRequest)
			return
		}
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
			http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		req := ar.Request
		resp := review(r.Context(), req)
		resp.UID = req.UID
		if !resp.Allowed {
			klog.V(2).InfoS("Refused an Antrea-native policy object", "kind", req.Kind.Kind, "namespace", req.Namespace,
				"name", req.Name, "operation", req.Operation, "user", req.UserInfo.Username, "reason", resp.Result.Message)
		}
		out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&out); err != nil {
			klog.ErrorS(err, "Could not write an AdmissionReview response", "kind", req.Kind.Kind, "name", req.Name)
		}
	})
}

// verdict allows the request when errs is empty and refuses it with every
// error, each naming its field, otherwise.
func verdict(errs field.ErrorList) *admissionv1.AdmissionResponse {
	if len(errs) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: errs.ToAggregate().Error(),
	}}
}

// decode reads the object (or, for a DELETE, the old object) of a request.
func decode(req *admissionv1.AdmissionRequest, obj, old any) *admissionv1.AdmissionResponse {
	for _, d := range []struct {
		raw []byte
		out any
	}{{req.Object.Raw, obj}, {req.OldObject.Raw, old}} {
		if d.out == nil || len(d.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(d.raw, d.out); err != nil {
			return verdict(field.ErrorList{field.Invalid(field.NewPath(""), string(d.raw), "cannot be read as a "+req.Kind.Kind+": "+err.Error())})
		}
	}
	return nil
}

func (v *Validator) reviewTier(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var t, old crdv1beta1.Tier
	if resp := decode(req, &t, &old); resp != nil {
		return resp
	}
	switch req.Operation {
	case admissionv1.Create:
		return verdict(v.ValidateTierCreate(ctx, &t, req.UserInfo.Username))
	case admissionv1.Update:
		return verdict(v.ValidateTierUpdate(&t, &old, req.UserInfo.Username))
	case admissionv1.Delete:
		return verdict(v.ValidateTierDelete(ctx, &old))
	}
	return verdict(nil)
}

// reviewObject reviews the creates and updates of one kind with validate
// (other operations are allowed). A namespaced object that does not say its
// namespace is in the request's.
func reviewObject[T any, PT interface {
	*T
	metav1.Object
}](validate func(context.Context, PT) field.ErrorList) reviewFunc {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		obj := PT(new(T))
		if resp := decode(req, obj, nil); resp != nil {
			return resp
		}
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return verdict(nil)
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(req.Namespace)
		}
		return verdict(validate(ctx, obj))
	}
}

// reviewSpecFixed is reviewObject for objects whose spec cannot change once
// created (a PacketCapture runs once, with the spec it was created with): an
// UPDATE that changes spec is refused naming it; metadata may change.
func reviewSpecFixed[T any, PT interface {
	*T
	metav1.Object
}](spec func(PT) any, validate func(context.Context, PT) field.ErrorList) reviewFunc {
	review := reviewObject(validate)
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation == admissionv1.Update {
			obj, old := PT(new(T)), PT(new(T))
			if resp := decode(req, obj, old); resp != nil {
				return resp
			}
			if !apiequality.Semantic.DeepEqual(spec(obj), spec(old)) {
				return verdict(field.ErrorList{field.Forbidden(field.NewPath("spec"),
					fmt.Sprintf("the spec of a %s cannot change once it is created: delete it and create another", req.Kind.Kind))})
			}
		}
		return review(ctx, req)
	}
}

func mutateACNP(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var p crdv1beta1.ClusterNetworkPolicy
	if resp := decode(req, &p, nil); resp != nil {
		return resp
	}
	return patched(policyDefaults(p.Spec.Tier, p.Spec.Ingress, p.Spec.Egress))
}

func mutateANNP(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var p crdv1beta1.NetworkPolicy
	if resp := decode(req, &p, nil); resp != nil {
		return resp
	}
	return patched(policyDefaults(p.Spec.Tier, p.Spec.Ingress, p.Spec.Egress))
}

// patched allows the request with the JSON Patch ops (none: unchanged).
func patched(ops []patchOp) *admissionv1.AdmissionResponse {
	if len(ops) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return verdict(field.ErrorList{field.InternalError(field.NewPath("spec"), err)})
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}
