package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
)

// The admin password lives in a Secret, bcrypt-hashed (key passwordHash).
// When the Secret does not exist, the server creates it with a random
// password in key initialPassword, as Argo CD does with its initial admin
// secret: the operator reads it with kubectl, logs in and changes it, which
// removes the key. Sessions are kept in memory (a restart logs everyone
// out): the browser holds only an HttpOnly, SameSite=Strict cookie, and the
// CSRF token the page keeps in a variable.

// Keys of the admin Secret.
const (
	PasswordHashKey    = "passwordHash"
	InitialPasswordKey = "initialPassword"
)

// Names of the cookie and the header carrying the CSRF token.
const (
	SessionCookie = "antrea-ui-session"
	CSRFHeader    = "X-CSRF-Token"
)

// MinPasswordLength is the shortest admin password the API accepts.
const MinPasswordLength = 10

// bcryptCost is bcrypt's default: about 50 ms a check on a laptop core.
const bcryptCost = bcrypt.DefaultCost

// passwordStore reads and writes the admin Secret.
type passwordStore struct {
	kube      kubernetes.Interface
	namespace string
	name      string
}

func (p *passwordStore) secretName() string { return p.namespace + "/" + p.name }

// ensure creates the Secret with a random initial password when it is absent.
func (p *passwordStore) ensure(ctx context.Context) error {
	_, err := p.kube.CoreV1().Secrets(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("secret %s: %w", p.secretName(), err)
	}
	raw := make([]byte, 15)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	initial := base64.RawURLEncoding.EncodeToString(raw)
	hash, err := bcrypt.GenerateFromPassword([]byte(initial), bcryptCost)
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.name,
		Labels: map[string]string{"app": "antrea", "component": "antrea-ui"}},
		Data: map[string][]byte{PasswordHashKey: hash, InitialPasswordKey: []byte(initial)}}
	if _, err := p.kube.CoreV1().Secrets(p.namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating secret %s: %w", p.secretName(), err)
	}
	klog.InfoS("Created the admin password Secret with a random initial password", "secret", p.secretName(), "key", InitialPasswordKey)
	return nil
}

// errWrongPassword is a password that does not match the hash.
var errWrongPassword = errors.New("wrong password")

// check compares password with the stored hash.
func (p *passwordStore) check(ctx context.Context, password string) error {
	s, err := p.kube.CoreV1().Secrets(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("secret %s: %w", p.secretName(), err)
	}
	hash := s.Data[PasswordHashKey]
	if len(hash) == 0 {
		return fmt.Errorf("secret %s has no key %s", p.secretName(), PasswordHashKey)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return errWrongPassword
	}
	return nil
}

// set stores the hash of password and drops the initial password.
func (p *passwordStore) set(ctx context.Context, password string) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcryptCost)
	if err != nil {
		return err
	}
	s, err := p.kube.CoreV1().Secrets(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("secret %s: %w", p.secretName(), err)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[PasswordHashKey] = hash
	delete(s.Data, InitialPasswordKey)
	if _, err := p.kube.CoreV1().Secrets(p.namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating secret %s: %w", p.secretName(), err)
	}
	return nil
}

// session is one logged-in browser.
type session struct {
	csrf    string
	expires time.Time
	// user is adminUser or the token's Kubernetes user.
	user string
	// clients act as the session's user: the UI's service account for the
	// admin, the user's own token for a token login.
	clients   *query.Clients
	tokenAuth bool
	// cfg is the clients' configuration (the agents' APIs are called with
	// its credentials); nil when unknown.
	cfg *rest.Config
}

// sessions are the logged-in browsers, by the SHA-256 of their cookie (a
// memory dump does not hand out live cookies).
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	all map[string]*session
	// expired remembers, for a while, cookies that expired, so that the
	// answer says "expired" rather than "not logged in".
	expired map[string]time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, all: map[string]*session{}, expired: map[string]time.Time{}}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenKey(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// create starts a session; it returns the cookie value and the CSRF token.
func (s *sessions) create(user string, cfg *rest.Config, clients *query.Clients, tokenAuth bool) (token string, sess session) {
	token = randomToken()
	sess = session{csrf: randomToken(), expires: s.now().Add(s.ttl), user: user, cfg: cfg, clients: clients, tokenAuth: tokenAuth}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked()
	s.all[tokenKey(token)] = &sess
	return token, sess
}

// Why a request has no valid session.
var (
	errNoSession      = errors.New("not logged in")
	errSessionExpired = errors.New("session expired: log in again")
)

// get returns the session of token.
func (s *sessions) get(token string) (session, error) {
	if token == "" {
		return session{}, errNoSession
	}
	k := tokenKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.all[k]
	if !ok {
		if _, was := s.expired[k]; was {
			return session{}, errSessionExpired
		}
		return session{}, errNoSession
	}
	if !s.now().Before(sess.expires) {
		delete(s.all, k)
		s.expired[k] = sess.expires
		return session{}, errSessionExpired
	}
	return *sess, nil
}

// delete ends the session of token.
func (s *sessions) delete(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.all, tokenKey(token))
}

// deleteAllBut ends every session but token's (after a password change).
func (s *sessions) deleteAllBut(token string) {
	keep := tokenKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.all {
		if k != keep {
			delete(s.all, k)
		}
	}
}

// gcLocked drops expired sessions and forgets old expiries.
func (s *sessions) gcLocked() {
	now := s.now()
	for k, sess := range s.all {
		if !now.Before(sess.expires) {
			delete(s.all, k)
			s.expired[k] = sess.expires
		}
	}
	for k, t := range s.expired {
		if now.Sub(t) > s.ttl {
			delete(s.expired, k)
		}
	}
}

// loginLimiter slows password guessing: after maxFailures failed logins
// within window, logins are refused until the window has passed.
type loginLimiter struct {
	mu       sync.Mutex
	now      func() time.Time
	failures []time.Time
}

const (
	maxLoginFailures   = 10
	loginFailureWindow = time.Minute
)

func (l *loginLimiter) recent() []time.Time {
	cut := l.now().Add(-loginFailureWindow)
	i := 0
	for i < len(l.failures) && l.failures[i].Before(cut) {
		i++
	}
	l.failures = l.failures[i:]
	return l.failures
}

func (l *loginLimiter) allowed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent()) < maxLoginFailures
}

func (l *loginLimiter) failed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.recent(), l.now())
}

// sameOrigin says whether a request's Origin (when the browser sends one)
// is this server: a login form posted from another site is refused even
// before the SameSite cookie and the CSRF token come into play.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	return u.Host == r.Host
}

// csrfMatches compares the request's CSRF header with the session's token.
func csrfMatches(r *http.Request, sess session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) == 1
}
