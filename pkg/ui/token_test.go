package ui

import (
	"encoding/json"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// saToken creates ServiceAccount demo/name (bound to the ClusterRole
// antrea-ui when bound) and returns a token of it from kube-apiserver's
// TokenRequest API.
func saToken(t *testing.T, cl *uiCluster, name string, bound bool) string {
	t.Helper()
	_, err := cl.admin.CoreV1().ServiceAccounts(demoNS).Create(cl.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	cl.must(t, err)
	if bound {
		_, err := cl.admin.RbacV1().ClusterRoleBindings().Create(cl.ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ui-token-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-ui"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: demoNS, Name: name}}}, metav1.CreateOptions{})
		cl.must(t, err)
	}
	tr, err := cl.admin.CoreV1().ServiceAccounts(demoNS).CreateToken(cl.ctx, name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", name, err)
	}
	return tr.Status.Token
}

func tokenLogin(t *testing.T, c *client, token string) (int, sessionResponse, string) {
	t.Helper()
	body, _ := json.Marshal(loginRequest{Token: token})
	code, b := c.do("POST", "/api/v1/login", string(body))
	var s sessionResponse
	_ = json.Unmarshal(b, &s)
	return code, s, string(b)
}

// checkTokenLogin: a token kube-apiserver issued logs in as its user and
// acts with that user's rights; a token without rights logs in and meets a
// 403 naming the user; a forged token is refused with 401; a token session
// cannot change the admin password.
func checkTokenLogin(t *testing.T, cl *uiCluster) {
	reader := saToken(t, cl, "ui-reader", true)
	nobody := saToken(t, cl, "ui-nobody", false)

	t.Run("a forged token is refused with 401", func(t *testing.T) {
		c := &client{t: t, base: cl.ui.URL}
		code, _, b := tokenLogin(t, c, reader[:len(reader)-4]+"AAAA")
		if code != 401 || !strings.Contains(b, "does not accept this token") {
			t.Errorf("forged token: %d %s, want 401 saying the API server refuses it", code, b)
		}
		if code, b := c.do("GET", "/api/v1/summary", ""); code != 401 {
			t.Errorf("after a refused token: %d %s, want 401", code, b)
		}
	})

	t.Run("a token with rights logs in as its user and reads the pages", func(t *testing.T) {
		c := &client{t: t, base: cl.ui.URL}
		code, s, b := tokenLogin(t, c, reader)
		if code != 200 || s.User != "system:serviceaccount:demo:ui-reader" || !s.TokenAuth {
			t.Fatalf("token login: %d %s, want 200 as system:serviceaccount:demo:ui-reader", code, b)
		}
		var sum Summary
		c.get("/api/v1/summary", &sum)
		if len(sum.Agents) != 2 {
			t.Errorf("summary as the token's user: %d agents, want 2", len(sum.Agents))
		}
		if code, b := c.do("POST", "/api/v1/password", `{"current":"`+testPassword+`","new":"0123456789abc"}`); code != 403 {
			t.Errorf("a token session changing the admin password: %d %s, want 403", code, b)
		}
	})

	t.Run("a token without rights sees 403 naming its user, not a stack trace", func(t *testing.T) {
		c := &client{t: t, base: cl.ui.URL}
		if code, _, b := tokenLogin(t, c, nobody); code != 200 {
			t.Fatalf("token login: %d %s", code, b)
		}
		for _, p := range []string{"/api/v1/summary", "/api/v1/policies", "/api/v1/pipeline", "/api/v1/endpoints"} {
			code, b := c.do("GET", p, "")
			if code != 403 || !strings.Contains(string(b), "your Kubernetes user system:serviceaccount:demo:ui-nobody lacks the rights") ||
				!strings.Contains(string(b), "forbidden") {
				t.Errorf("GET %s: %d %s, want 403 naming the user and what is forbidden", p, code, b)
			}
		}
	})
}
