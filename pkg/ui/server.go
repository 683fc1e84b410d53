package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
)

// Config is what the server needs.
type Config struct {
	// Clients reach kube-apiserver (and through it the controller's
	// aggregated APIs) with the UI's own service account.
	Clients *query.Clients
	// SecretNamespace and SecretName name the admin password Secret.
	SecretNamespace, SecretName string
	// SessionTTL is how long a login lasts.
	SessionTTL time.Duration
	// SecureCookie marks the session cookie Secure (served over HTTPS, or
	// behind a proxy that terminates TLS).
	SecureCookie bool
	// Now is the clock (tests move it); nil is time.Now.
	Now func() time.Time
	// RESTConfig is Clients' configuration: the agents' APIs are called
	// with its credentials, and a token login gets clients of the same API
	// server carrying the user's token.
	RESTConfig *rest.Config
	// TokenLogin offers the Kubernetes bearer-token login (RESTConfig set).
	TokenLogin bool
	// FlowGetter reads the Flow Aggregator's API; nil: its Service's
	// ClusterIP (in the cluster).
	FlowGetter query.FlowGetter
}

// Defaults of Config.
const (
	DefaultSecretName = "antrea-ui-admin"
	DefaultSessionTTL = 8 * time.Hour
)

// Server is the UI's HTTP handler.
type Server struct {
	cfg      Config
	clients  *query.Clients
	password *passwordStore
	sessions *sessions
	limiter  *loginLimiter
	now      func() time.Time
	mux      *http.ServeMux
}

// New builds the server; Start makes sure the admin Secret exists.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SecretName == "" {
		cfg.SecretName = DefaultSecretName
	}
	if cfg.SecretNamespace == "" {
		cfg.SecretNamespace = query.AntreaNamespace
	}
	s := &Server{cfg: cfg, clients: cfg.Clients, now: cfg.Now,
		password: &passwordStore{kube: cfg.Clients.Kube, namespace: cfg.SecretNamespace, name: cfg.SecretName},
		sessions: newSessions(cfg.SessionTTL, cfg.Now),
		limiter:  &loginLimiter{now: cfg.Now},
		mux:      http.NewServeMux()}
	s.routes()
	return s
}

// Start creates the admin Secret when it does not exist.
func (s *Server) Start(ctx context.Context) error { return s.password.ensure(ctx) }

func (s *Server) routes() {
	s.mux.HandleFunc("GET /{$}", s.serveIndex)
	s.mux.HandleFunc("GET /assets/{file}", s.serveAsset)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("POST /api/v1/login", s.login)
	s.mux.Handle("POST /api/v1/logout", s.authed(s.logout))
	s.mux.HandleFunc("GET /api/v1/session", s.session)
	s.mux.Handle("POST /api/v1/password", s.authed(s.changePassword))
	s.mux.Handle("GET /api/v1/summary", s.authed(s.summary))
	s.mux.Handle("GET /api/v1/endpoints", s.authed(s.endpoints))
	s.mux.Handle("POST /api/v1/traceflows", s.authed(s.traceflow))
	s.mux.Handle("GET /api/v1/policies", s.authed(s.policies))
	s.mux.Handle("GET /api/v1/pipeline", s.authed(s.pipeline))
	s.mux.Handle("GET /api/v1/flows", s.authed(s.flows))
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API %s %s", r.Method, r.URL.Path))
	})
}

// contentSecurityPolicy allows only this origin's script, style and
// requests: no inline script or style, no framing, no plug-ins.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP sets the security headers on every response, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
	if r.TLS != nil || s.cfg.SecureCookie {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.Set("Cache-Control", "no-store")
	}
	s.mux.ServeHTTP(w, r)
}

// apiHandler serves one API call of a logged-in session; sess.clients act
// as the session's user.
type apiHandler func(w http.ResponseWriter, r *http.Request, token string, sess session)

// authed checks the session cookie and, for a state-changing method, the
// CSRF header.
func (s *Server) authed(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if c, err := r.Cookie(SessionCookie); err == nil {
			token = c.Value
		}
		sess, err := s.sessions.get(token)
		if err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !csrfMatches(r, sess) {
				klog.InfoS("Refused a request with a missing or wrong CSRF token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				writeError(w, http.StatusForbidden, "CSRF token missing or wrong: reload the page")
				return
			}
		}
		h(w, r, token, sess)
	})
}

// loginRequest is the admin password, or a Kubernetes bearer token.
type loginRequest struct {
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

type sessionResponse struct {
	LoggedIn bool `json:"loggedIn"`
	// User is who the session acts as: "admin" (the UI's service
	// account) or the token's Kubernetes user.
	User      string `json:"user,omitempty"`
	TokenAuth bool   `json:"tokenLogin,omitempty"`
	// TokenLogin says the login page offers a token (on the login answer
	// of a logged-out session).
	TokenLogin bool      `json:"tokenLoginEnabled,omitempty"`
	CSRFToken  string    `json:"csrfToken,omitempty"`
	Expires    time.Time `json:"expires,omitzero"`
	// Reason says why not logged in.
	Reason string `json:"reason,omitempty"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "login from another origin refused")
		return
	}
	var req loginRequest
	if !readJSON(w, r, &req) {
		return
	}
	if !s.limiter.allowed() {
		writeError(w, http.StatusTooManyRequests, "too many failed logins: wait a minute")
		return
	}
	if req.Token != "" {
		s.tokenLogin(w, r, req.Token)
		return
	}
	if err := s.password.check(r.Context(), req.Password); err != nil {
		if errors.Is(err, errWrongPassword) {
			s.limiter.failed()
			klog.InfoS("Refused a login: wrong password", "remote", r.RemoteAddr)
			writeError(w, http.StatusUnauthorized, "wrong password")
			return
		}
		s.kubeError(w, session{}, "reading the admin password", err)
		return
	}
	s.startSession(w, r, adminUser, s.cfg.RESTConfig, s.clients, false)
}

// adminUser is the password session's name: it acts as the UI's service
// account.
const adminUser = "admin"

// startSession sets the cookie of a new session acting with clients.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, user string, cfg *rest.Config, clients *query.Clients, tokenAuth bool) {
	token, sess := s.sessions.create(user, cfg, clients, tokenAuth)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.cfg.SecureCookie || r.TLS != nil, Expires: sess.expires})
	klog.InfoS("Logged in", "user", user, "token", tokenAuth, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, sessionResponse{LoggedIn: true, User: user, TokenAuth: tokenAuth, CSRFToken: sess.csrf, Expires: sess.expires})
}

func (s *Server) logout(w http.ResponseWriter, _ *http.Request, token string, _ session) {
	s.sessions.delete(token)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}

// session tells the page whether it is logged in: 200 either way, so that
// opening the UI logged out is not an error in the browser's console.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	token := ""
	if c, err := r.Cookie(SessionCookie); err == nil {
		token = c.Value
	}
	sess, err := s.sessions.get(token)
	if err != nil {
		writeJSON(w, http.StatusOK, sessionResponse{Reason: err.Error(), TokenLogin: s.tokenLoginOn()})
		return
	}
	writeJSON(w, http.StatusOK, sessionResponse{LoggedIn: true, User: sess.user, TokenAuth: sess.tokenAuth, CSRFToken: sess.csrf, Expires: sess.expires})
}

type passwordRequest struct {
	Current string `json:"current"`
	New     string `json:"new"`
}

func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, token string, sess session) {
	var req passwordRequest
	if !readJSON(w, r, &req) {
		return
	}
	if sess.tokenAuth {
		writeError(w, http.StatusForbidden, "logged in with a Kubernetes token: only the admin session changes the admin password")
		return
	}
	if len(req.New) < MinPasswordLength {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the new password is too short: at least %d characters", MinPasswordLength))
		return
	}
	if err := s.password.check(r.Context(), req.Current); err != nil {
		if errors.Is(err, errWrongPassword) {
			writeError(w, http.StatusForbidden, "the current password is wrong")
			return
		}
		s.kubeError(w, session{}, "reading the admin password", err)
		return
	}
	if err := s.password.set(r.Context(), req.New); err != nil {
		s.kubeError(w, session{}, "storing the admin password", err)
		return
	}
	s.sessions.deleteAllBut(token)
	klog.InfoS("Changed the admin password; other sessions ended", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"status": "password changed"})
}

// errorResponse is every error's body.
type errorResponse struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.ErrorS(err, "Writing a response")
	}
}

// maxBody bounds request bodies.
const maxBody = 64 << 10

// readJSON decodes the JSON body into v, or answers 400/415.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "send application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// kubeError answers for an error of the Kubernetes API: lack of rights is
// 403 and says who may not do it (the UI's service account, or the user of
// a token login), a missing object 404, a refused input 400, anything else
// 502 (the UI works, what it reads does not answer).
func (s *Server) kubeError(w http.ResponseWriter, sess session, doing string, err error) {
	var status int
	msg := doing + ": "
	switch {
	case (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && sess.tokenAuth:
		status = http.StatusForbidden
		msg += fmt.Sprintf("your Kubernetes user %s lacks the rights (ask for a RoleBinding, e.g. to the ClusterRole antrea-ui's rules): ", sess.user)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		status = http.StatusForbidden
		msg += "the UI's service account lacks the rights (see its ClusterRole antrea-ui): "
	case apierrors.IsNotFound(err):
		status = http.StatusNotFound
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsAlreadyExists(err):
		status = http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		status = http.StatusGatewayTimeout
	default:
		status = http.StatusBadGateway
	}
	if status >= 500 {
		klog.ErrorS(err, "Kubernetes API error", "doing", doing)
	}
	writeError(w, status, msg+apiMessage(err))
}

// apiMessage is the API server's own message when there is one.
func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}

// ListenAndServe serves on addr until ctx ends, then shuts down gracefully.
func (s *Server) ListenAndServe(ctx context.Context, addr, certFile, keyFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() {
		klog.InfoS("Serving the web UI", "address", ln.Addr().String(), "tls", certFile != "")
		if certFile != "" {
			errc <- srv.ServeTLS(ln, certFile, keyFile)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	return nil
}
