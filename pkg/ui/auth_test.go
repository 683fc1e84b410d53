package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/antctl/query"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

const testPassword = "correct horse battery"

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeServer is a UI server on fake clientsets whose admin Secret holds
// testPassword.
type fakeServer struct {
	*httptest.Server
	kube   *kubefake.Clientset
	antrea *antreafake.Clientset
	clock  *clock
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultSecretName},
		Data: map[string][]byte{PasswordHashKey: hash}})
	antrea := antreafake.NewSimpleClientset()
	c := &clock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	s := New(Config{Clients: &query.Clients{Kube: kube, Antrea: antrea}, SessionTTL: time.Hour, Now: c.now})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &fakeServer{Server: hs, kube: kube, antrea: antrea, clock: c}
}

// call makes one request; cookie and csrf may be empty.
func (f *fakeServer) call(t *testing.T, method, path, body, cookie, csrf string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
	}
	if csrf != "" {
		req.Header.Set(CSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login returns the session cookie and CSRF token.
func (f *fakeServer) login(t *testing.T) (cookie, csrf string) {
	t.Helper()
	resp, body := f.call(t, "POST", "/api/v1/login", `{"password":"`+testPassword+`"}`, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			cookie = c.Value
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", c)
			}
		}
	}
	var s sessionResponse
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.CSRFToken == "" || cookie == "" {
		t.Fatalf("login answered %s (cookie %q)", body, cookie)
	}
	return cookie, s.CSRFToken
}

func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e errorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e.Error
}

func TestEachRefusalHasItsStatusAndSaysWhy(t *testing.T) {
	f := newFakeServer(t)
	cookie, csrf := f.login(t)
	tests := []struct {
		name                string
		method, path, body  string
		cookie, csrf        string
		origin, contentType string
		wantStatus          int
		wantMsg             string
	}{
		{name: "a wrong password is 401", method: "POST", path: "/api/v1/login", body: `{"password":"guess"}`,
			wantStatus: 401, wantMsg: "wrong password"},
		{name: "a login posted from another site is 403", method: "POST", path: "/api/v1/login", body: `{"password":"` + testPassword + `"}`,
			origin: "https://evil.example", wantStatus: 403, wantMsg: "another origin"},
		{name: "a login that is not JSON (a plain form) is 415", method: "POST", path: "/api/v1/login", body: "password=x",
			contentType: "application/x-www-form-urlencoded", wantStatus: 415, wantMsg: "application/json"},
		{name: "an API call without a session is 401", method: "GET", path: "/api/v1/summary", wantStatus: 401, wantMsg: "not logged in"},
		{name: "a forged session cookie is 401", method: "GET", path: "/api/v1/summary", cookie: "forged", wantStatus: 401, wantMsg: "not logged in"},
		{name: "a state-changing call without the CSRF token is 403", method: "POST", path: "/api/v1/traceflows", body: `{}`,
			cookie: cookie, wantStatus: 403, wantMsg: "CSRF"},
		{name: "a state-changing call with a forged CSRF token is 403", method: "POST", path: "/api/v1/logout", body: `{}`,
			cookie: cookie, csrf: "forged", wantStatus: 403, wantMsg: "CSRF"},
		{name: "a password change with a wrong current password is 403", method: "POST", path: "/api/v1/password",
			body: `{"current":"nope","new":"a long new password"}`, cookie: cookie, csrf: csrf, wantStatus: 403, wantMsg: "current password is wrong"},
		{name: "a too short new password is 400", method: "POST", path: "/api/v1/password",
			body: `{"current":"` + testPassword + `","new":"short"}`, cookie: cookie, csrf: csrf, wantStatus: 400, wantMsg: "too short"},
		{name: "an unknown API is 404", method: "GET", path: "/api/v1/nothing", cookie: cookie, wantStatus: 404, wantMsg: "no API"},
		{name: "a Traceflow without endpoints is 400", method: "POST", path: "/api/v1/traceflows", body: `{"protocol":"TCP"}`,
			cookie: cookie, csrf: csrf, wantStatus: 400, wantMsg: "pick a source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, f.URL+tt.path, strings.NewReader(tt.body))
			ct := tt.contentType
			if ct == "" && tt.body != "" {
				ct = "application/json"
			}
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.cookie != "" {
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tt.cookie})
			}
			if tt.csrf != "" {
				req.Header.Set(CSRFHeader, tt.csrf)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(errorOf(t, string(b)), tt.wantMsg) {
				t.Errorf("%s %s: %d %s, want %d with %q", tt.method, tt.path, resp.StatusCode, b, tt.wantStatus, tt.wantMsg)
			}
		})
	}
}

func TestAnExpiredSessionIsRefusedAsExpired(t *testing.T) {
	f := newFakeServer(t)
	cookie, _ := f.login(t)
	if resp, body := f.call(t, "GET", "/api/v1/flows", "", cookie, ""); resp.StatusCode != 200 {
		t.Fatalf("fresh session: %d %s", resp.StatusCode, body)
	}
	f.clock.add(time.Hour + time.Second)
	resp, body := f.call(t, "GET", "/api/v1/flows", "", cookie, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(errorOf(t, body), "session expired") {
		t.Errorf("after the TTL: %d %s, want 401 session expired", resp.StatusCode, body)
	}
	// The page's own question is answered 200, with the reason.
	resp, body = f.call(t, "GET", "/api/v1/session", "", cookie, "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"loggedIn":false`) || !strings.Contains(body, "session expired") {
		t.Errorf("session after the TTL: %d %s", resp.StatusCode, body)
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	f := newFakeServer(t)
	cookie, csrf := f.login(t)
	if resp, body := f.call(t, "POST", "/api/v1/logout", "", cookie, csrf); resp.StatusCode != 200 {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	if resp, _ := f.call(t, "GET", "/api/v1/flows", "", cookie, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", resp.StatusCode)
	}
}

func TestChangingThePasswordStoresItsHashAndEndsOtherSessions(t *testing.T) {
	f := newFakeServer(t)
	cookie, csrf := f.login(t)
	other, _ := f.login(t)
	const next = "an entirely new password"
	if resp, body := f.call(t, "POST", "/api/v1/password", `{"current":"`+testPassword+`","new":"`+next+`"}`, cookie, csrf); resp.StatusCode != 200 {
		t.Fatalf("change: %d %s", resp.StatusCode, body)
	}
	s, err := f.kube.CoreV1().Secrets("kube-system").Get(t.Context(), DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword(s.Data[PasswordHashKey], []byte(next)) != nil || strings.Contains(string(s.Data[PasswordHashKey]), next) {
		t.Errorf("the Secret does not hold the new password's bcrypt hash")
	}
	if resp, _ := f.call(t, "GET", "/api/v1/flows", "", other, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the other session survived the change: %d", resp.StatusCode)
	}
	if resp, _ := f.call(t, "GET", "/api/v1/flows", "", cookie, ""); resp.StatusCode != 200 {
		t.Errorf("the changing session ended: %d", resp.StatusCode)
	}
	if resp, _ := f.call(t, "POST", "/api/v1/login", `{"password":"`+testPassword+`"}`, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old password still logs in: %d", resp.StatusCode)
	}
}

func TestRepeatedWrongPasswordsAreSlowedDown(t *testing.T) {
	f := newFakeServer(t)
	for range maxLoginFailures {
		f.call(t, "POST", "/api/v1/login", `{"password":"guess"}`, "", "")
	}
	resp, body := f.call(t, "POST", "/api/v1/login", `{"password":"`+testPassword+`"}`, "", "")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after %d failures: %d %s, want 429", maxLoginFailures, resp.StatusCode, body)
	}
	f.clock.add(loginFailureWindow + time.Second)
	if resp, body := f.call(t, "POST", "/api/v1/login", `{"password":"`+testPassword+`"}`, "", ""); resp.StatusCode != 200 {
		t.Errorf("a minute later: %d %s", resp.StatusCode, body)
	}
}

func TestAnAPIErrorFromLackOfRightsIs403NamingTheServiceAccount(t *testing.T) {
	f := newFakeServer(t)
	cookie, _ := f.login(t)
	f.antrea.PrependReactor("list", "antreaagentinfos", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "crd.antrea.io", Resource: "antreaagentinfos"}, "",
			errFake("no RBAC rule"))
	})
	resp, body := f.call(t, "GET", "/api/v1/summary", "", cookie, "")
	msg := errorOf(t, body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "service account lacks the rights") || !strings.Contains(msg, "antreaagentinfos") {
		t.Errorf("forbidden list: %d %q, want 403 naming the service account and the resource", resp.StatusCode, msg)
	}
}

type errFake string

func (e errFake) Error() string { return string(e) }

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	f := newFakeServer(t)
	cookie, _ := f.login(t)
	for _, p := range []struct{ path, cookie string }{{"/", ""}, {"/assets/main.js", ""}, {"/assets/style.css", ""},
		{"/assets/nothing.js", ""}, {"/api/v1/summary", ""}, {"/api/v1/flows", cookie}, {"/healthz", ""}} {
		resp, _ := f.call(t, "GET", p.path, "", p.cookie, "")
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", p.path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", p.path, h)
		}
		if strings.HasPrefix(p.path, "/api/") && h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p.path, h.Get("Cache-Control"))
		}
	}
}

func TestAMissingSecretIsCreatedWithARandomInitialPassword(t *testing.T) {
	kube := kubefake.NewClientset()
	s := New(Config{Clients: &query.Clients{Kube: kube, Antrea: antreafake.NewSimpleClientset()}})
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	sec, err := kube.CoreV1().Secrets("kube-system").Get(t.Context(), DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	initial := sec.Data[InitialPasswordKey]
	if len(initial) < 16 || bcrypt.CompareHashAndPassword(sec.Data[PasswordHashKey], initial) != nil {
		t.Fatalf("secret %v: want a random initial password and its hash", sec.Data)
	}
	// A second start keeps it.
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	again, _ := kube.CoreV1().Secrets("kube-system").Get(t.Context(), DefaultSecretName, metav1.GetOptions{})
	if string(again.Data[InitialPasswordKey]) != string(initial) {
		t.Errorf("a restart replaced the password")
	}
}

// A warm load costs a 304 per file: the assets carry an ETag and are
// revalidated.
func TestAssetsAreRevalidatedByETag(t *testing.T) {
	f := newFakeServer(t)
	for _, p := range []string{"/", "/assets/main.js", "/assets/style.css"} {
		resp, _ := f.call(t, "GET", p, "", "", "")
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != 200 || etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: %d, ETag %q, Cache-Control %q", p, resp.StatusCode, etag, resp.Header.Get("Cache-Control"))
		}
		req, _ := http.NewRequest("GET", f.URL+p, nil)
		req.Header.Set("If-None-Match", etag)
		again, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", p, again.StatusCode)
		}
	}
	if resp, _ := f.call(t, "GET", "/assets/SOURCES.sha256", "", "", ""); resp.StatusCode != 404 {
		t.Errorf("the sources digest is served: %d", resp.StatusCode)
	}
}
