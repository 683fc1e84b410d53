package admission

import (
	"context"
	"net/url"
	"strings"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/util/fileserver"
)

// PathValidateSBC is upstream's path of the SupportBundleCollection webhook.
const PathValidateSBC = "/validate/supportbundlecollection"

// ValidateSupportBundleCollection refuses, naming the field, a collection
// that could never succeed: no Nodes (nor ExternalNodes) form, a bad label
// selector, expirationMinutes below 1, a sinceTime that is not a duration, a
// file server URL that is not sftp://host:port[/path] (the scheme may be
// left out, as upstream's), a host public key that is not one (upstream
// refuses it too), an authType other than BasicAuthentication (the only one
// upstream implements) and a missing authSecret. Its webhook refuses an
// update that changes the spec (reviewSpecFixed): a collection starts when
// it is created, and upstream refuses the updates of a started one.
func ValidateSupportBundleCollection(_ context.Context, sbc *crdv1alpha1.SupportBundleCollection) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := &sbc.Spec
	if s.Nodes == nil && s.ExternalNodes == nil {
		errs = append(errs, field.Required(spec.Child("nodes"), "one of nodes and externalNodes must be set"))
	}
	if s.Nodes != nil {
		errs = append(errs, validSelector(s.Nodes.NodeSelector, spec.Child("nodes", "nodeSelector"))...)
		errs = append(errs, validSelector(&metav1.LabelSelector{MatchLabels: s.Nodes.MatchLabels}, spec.Child("nodes", "matchLabels"))...)
	}
	if s.ExternalNodes != nil {
		if s.ExternalNodes.Namespace == "" {
			errs = append(errs, field.Required(spec.Child("externalNodes", "namespace"), "the Namespace of the ExternalNodes"))
		}
		errs = append(errs, validSelector(s.ExternalNodes.NodeSelector, spec.Child("externalNodes", "nodeSelector"))...)
	}
	if s.ExpirationMinutes < 1 {
		errs = append(errs, field.Invalid(spec.Child("expirationMinutes"), s.ExpirationMinutes, "must be at least 1"))
	}
	if _, err := crdv1alpha1.SinceDuration(s.SinceTime); err != nil {
		errs = append(errs, field.Invalid(spec.Child("sinceTime"), s.SinceTime, err.Error()))
	}
	errs = append(errs, validFileServerURL(s.FileServer.URL, spec.Child("fileServer", "url"))...)
	if len(s.FileServer.HostPublicKey) > 0 {
		if _, err := ssh.ParsePublicKey(s.FileServer.HostPublicKey); err != nil {
			errs = append(errs, field.Invalid(spec.Child("fileServer", "hostPublicKey"), "",
				"not an SSH public key in wire format (base64 in YAML): "+err.Error()))
		}
	}
	auth := spec.Child("authentication")
	if s.Authentication.AuthType != crdv1alpha1.BasicAuthentication {
		errs = append(errs, field.NotSupported(auth.Child("authType"), s.Authentication.AuthType,
			[]string{string(crdv1alpha1.BasicAuthentication)}))
	}
	switch ref := s.Authentication.AuthSecret; {
	case ref == nil:
		errs = append(errs, field.Required(auth.Child("authSecret"), "the Secret with the file server's username and password"))
	default:
		if ref.Name == "" {
			errs = append(errs, field.Required(auth.Child("authSecret", "name"), ""))
		}
		if ref.Namespace == "" {
			errs = append(errs, field.Required(auth.Child("authSecret", "namespace"), ""))
		}
	}
	return errs
}

func validSelector(s *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return field.ErrorList{field.Invalid(path, s.String(), err.Error())}
	}
	return nil
}

// validFileServerURL checks the URL as the upload will read it; a URL with
// credentials is refused without being echoed.
func validFileServerURL(raw string, path *field.Path) field.ErrorList {
	full := crdv1alpha1.FileServerURL(raw)
	if u, err := url.Parse(full); err == nil && u.User != nil {
		return field.ErrorList{field.Invalid(path, "[redacted]", "credentials belong in the authSecret, not the URL")}
	}
	if _, _, err := fileserver.ParseURL(full); err != nil {
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return field.ErrorList{field.Invalid(path, raw, msg)}
	}
	return nil
}
