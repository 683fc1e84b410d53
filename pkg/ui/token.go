package ui

import (
	"net/http"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
)

// Kubernetes bearer-token login: the user pastes a token (a ServiceAccount
// token from kubectl create token, or any token kube-apiserver accepts, OIDC
// included); the UI has kube-apiserver review it (TokenReview, with its own
// service account) and the session then calls the API server with that
// token itself, so the user sees exactly what their own RBAC allows and a
// Traceflow is created in their name. The token is kept only in the
// server's memory, for the session's life, like the session itself.
//
// Why the token and not impersonation: impersonating users and groups
// would give the UI's service account the power to act as anyone, which is
// more than every page needs together; with the token, the UI holds no
// right its users do not already have.

// tokenLogin reviews token and starts a session acting with it.
func (s *Server) tokenLogin(w http.ResponseWriter, r *http.Request, token string) {
	if !s.tokenLoginOn() {
		writeError(w, http.StatusBadRequest, "token login is off (antrea-ui --token-login=false): log in with the admin password")
		return
	}
	review, err := s.clients.Kube.AuthenticationV1().TokenReviews().Create(r.Context(),
		&authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		s.kubeError(w, session{}, "reviewing the token (TokenReview)", err)
		return
	}
	if !review.Status.Authenticated {
		s.limiter.failed()
		klog.InfoS("Refused a token login: kube-apiserver does not accept the token", "remote", r.RemoteAddr, "reason", review.Status.Error)
		msg := "the Kubernetes API server does not accept this token"
		if review.Status.Error != "" {
			msg += ": " + review.Status.Error
		}
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	cfg := tokenConfig(s.cfg.RESTConfig, token)
	clients, err := query.NewClients(cfg)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.startSession(w, r, review.Status.User.Username, cfg, clients, true)
}

// tokenLoginOn: the login page offers a token.
func (s *Server) tokenLoginOn() bool { return s.cfg.TokenLogin && s.cfg.RESTConfig != nil }

// tokenConfig is base without its credentials, carrying token.
func tokenConfig(base *rest.Config, token string) *rest.Config {
	c := rest.AnonymousClientConfig(base)
	c.BearerToken = token
	return c
}
