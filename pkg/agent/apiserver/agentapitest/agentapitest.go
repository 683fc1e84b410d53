// Package agentapitest runs the agent API (pkg/agent/apiserver) on loopback
// behind a real kube-apiserver (envtest) holding build/yamls/antrea.yml's
// RBAC and CRDs, and makes callers with ServiceAccount tokens: for tests of
// what the API serves, through its authentication and authorization.
package agentapitest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// API is a running agent API and its kube-apiserver.
type API struct {
	Ctx    context.Context
	CP     *apiservertest.ControlPlane
	Kube   kubernetes.Interface
	URL    string
	Server *agentapi.Server
}

// Start runs kube-apiserver with the manifest's RBAC and CRDs, then the
// agent API serving q (extra runs on the server before it starts), and
// waits until it is ready. Everything stops at cleanup.
func Start(t testing.TB, q *agentapi.Querier, extra func(*agentapi.Server)) *API {
	t.Helper()
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	// The loopback APIService the manifest helper registers points at a
	// port nothing serves: this test has no controller.
	cp.ApplyAntrea(t, ctx, port+1)
	o := agentapi.NewOptions(port)
	o.SecureServing.Listener = ln
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.WithKubeAPIServer(cp.Kubeconfig, nil)
	s, err := agentapi.New(o, q)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	if extra != nil {
		extra(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent API Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the agent API server did not stop")
		}
	})
	a := &API{Ctx: ctx, CP: cp, Kube: kubernetes.NewForConfigOrDie(cp.Config), URL: fmt.Sprintf("https://127.0.0.1:%d", port), Server: s}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := Get(ctx, a.URL, "", "/readyz")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("agent API not ready: %v", err)
	}
	return a
}

// Token creates ServiceAccount default/sa bound to the ClusterRoles roles
// and returns a token kube-apiserver issued for it.
func Token(t testing.TB, ctx context.Context, kube kubernetes.Interface, sa string, roles ...string) string {
	t.Helper()
	_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, role := range roles {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "default"}}}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// Get sends GET base+path with a bearer token ("" for none), not verifying
// the server's (self-signed) certificate, and returns the status and body.
func Get(ctx context.Context, base, token, path string) (int, []byte) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed
		Timeout: 20 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, []byte(err.Error())
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// GetOK polls GET until it answers 200 (RBAC reaches the authorizer a
// moment after it is created) and returns the body.
func GetOK(t testing.TB, ctx context.Context, base, token, path string) []byte {
	t.Helper()
	var code int
	var body []byte
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		code, body = Get(ctx, base, token, path)
		return code == http.StatusOK, nil
	})
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}
