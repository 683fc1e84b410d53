package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// agentAPI is a running agent API server with a kube-apiserver holding the
// chart's RBAC.
type agentAPI struct {
	ctx  context.Context
	cp   *apiservertest.ControlPlane
	kube kubernetes.Interface
	url  string
}

// startAgentAPI runs kube-apiserver (envtest) with build/yamls/antrea.yml's
// RBAC and CRDs, and the agent API on loopback serving q.
func startAgentAPI(t *testing.T, q *agentapi.Querier) *agentAPI {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unused := free.Addr().(*net.TCPAddr).Port
	free.Close()
	cp.ApplyAntrea(t, ctx, unused)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	o := agentapi.NewOptions(port)
	o.SecureServing.Listener = ln
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.WithKubeAPIServer(cp.Kubeconfig, nil)
	s, err := agentapi.New(o, q)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the agent API server did not stop")
		}
	})
	a := &agentAPI{ctx: ctx, cp: cp, kube: kubernetes.NewForConfigOrDie(cp.Config), url: fmt.Sprintf("https://127.0.0.1:%d", port)}
	// Ready once /readyz answers (anyone may ask).
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := a.get(t, nil, "", "/readyz")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("agent API not ready: %v", err)
	}
	return a
}

// serviceAccountToken creates ServiceAccount default/name and returns a
// token kube-apiserver issued for it (TokenRequest).
func (a *agentAPI) serviceAccountToken(t *testing.T, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if _, err := a.kube.CoreV1().ServiceAccounts("default").Create(a.ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := a.kube.CoreV1().ServiceAccounts("default").CreateToken(a.ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bind binds ClusterRole role to subject.
func (a *agentAPI) bind(t *testing.T, role string, subject rbacv1.Subject) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{subject}}
	if _, err := a.kube.RbacV1().ClusterRoleBindings().Create(a.ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// get sends GET path with a bearer token (none: anonymous) or the client
// certificate of cfg, and returns the status and body.
func (a *agentAPI) get(t *testing.T, cfg *rest.Config, token, path string) (int, []byte) {
	t.Helper()
	tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the agent's self-signed certificate
	if cfg != nil {
		pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 20 * time.Second}
	req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, a.url+path, nil)
	if err != nil {
		t.Fatal(err)
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

func testQuerier() *agentapi.Querier {
	store := interfacestore.NewInterfaceStore()
	web := interfacestore.NewContainerInterface("web-0-abc", "c0ffee0123456789", "web-0", "demo", "eth0",
		net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}, []net.IP{net.ParseIP("10.10.0.5").To4()}, 0)
	web.OVSPortConfig = &interfacestore.OVSPortConfig{PortUUID: "uuid-web", OFPort: 5}
	db := interfacestore.NewContainerInterface("db-0-abc", "deadbeef", "db-0", "data", "eth0",
		net.HardwareAddr{0x0a, 0, 0, 0, 0, 2}, []net.IP{net.ParseIP("10.10.0.6").To4()}, 0)
	db.OVSPortConfig = &interfacestore.OVSPortConfig{PortUUID: "uuid-db", OFPort: 6}
	store.Initialize([]*interfacestore.InterfaceConfig{web, db,
		interfacestore.NewGatewayInterface("antrea-gw0", nil, []net.IP{net.ParseIP("10.10.0.1").To4()})})
	flow, err := openflow.ParseFlow("cookie=0x1000000001, table=3, priority=200,ip,in_port=5,nw_src=10.10.0.5 actions=resubmit(,4)")
	if err != nil {
		panic(err)
	}
	return &agentapi.Querier{
		NodeName:     "node-1",
		Interfaces:   store,
		FeatureGates: map[string]bool{"AntreaProxy": true},
		DumpFlows: func(_ context.Context, table uint8) ([]openflow.FlowStats, error) {
			if table != openflow.TableAll && table != 3 {
				return nil, nil
			}
			return []openflow.FlowStats{{Flow: *flow, DurationSec: 7, PacketCount: 42, ByteCount: 4200}}, nil
		},
		AgentInfo: func(context.Context) (any, error) { return map[string]string{"nodeName": "node-1"}, nil },
	}
}

// TestAgentAPIAuthnAuthz: the agent API asks kube-apiserver who the caller
// is (TokenReview, client certificate) and whether it may (RBAC through
// SubjectAccessReview): anonymous callers reach only the health checks, a
// token kube-apiserver rejects gets 401, a ServiceAccount without a binding
// 403, one bound to the chart's antctl ClusterRole 200, as is a user with a
// client certificate in a bound group.
func TestAgentAPIAuthnAuthz(t *testing.T) {
	a := startAgentAPI(t, testQuerier())
	reader := a.serviceAccountToken(t, "reader")
	nobody := a.serviceAccountToken(t, "nobody")
	scraper := a.serviceAccountToken(t, "prometheus")
	a.bind(t, "antctl", rbacv1.Subject{Kind: "ServiceAccount", Name: "reader", Namespace: "default"})
	a.bind(t, "antctl", rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "antctl-users"})
	a.bind(t, "antrea-metrics-reader", rbacv1.Subject{Kind: "ServiceAccount", Name: "prometheus", Namespace: "default"})
	certUser, err := a.cp.Env.AddUser(envtest.User{Name: "alice", Groups: []string{"antctl-users"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	strangerUser, err := a.cp.Env.AddUser(envtest.User{Name: "mallory"}, nil)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name  string
		cert  *rest.Config
		token string
		path  string
		want  int
	}{
		{"anonymous /healthz", nil, "", "/healthz", 200},
		{"anonymous /livez", nil, "", "/livez", 200},
		{"anonymous /podinterfaces", nil, "", "/podinterfaces", 403},
		{"anonymous /metrics", nil, "", "/metrics", 403},
		{"a token kube-apiserver rejects", nil, "not-a-token", "/podinterfaces", 401},
		{"ServiceAccount without RBAC", nil, nobody, "/podinterfaces", 403},
		{"ServiceAccount without RBAC /metrics", nil, nobody, "/metrics", 403},
		{"antctl ServiceAccount /podinterfaces", nil, reader, "/podinterfaces", 200},
		{"antctl ServiceAccount /ovsflows", nil, reader, "/ovsflows", 200},
		{"antctl ServiceAccount /featuregates", nil, reader, "/featuregates", 200},
		{"antctl ServiceAccount /agentinfo", nil, reader, "/agentinfo", 200},
		{"antctl ServiceAccount /metrics", nil, reader, "/metrics", 200},
		{"metrics reader /metrics", nil, scraper, "/metrics", 200},
		{"metrics reader /ovsflows", nil, scraper, "/ovsflows", 403},
		{"client certificate in a bound group", certUser.Config(), "", "/podinterfaces", 200},
		{"client certificate without RBAC", strangerUser.Config(), "", "/podinterfaces", 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			// RBAC objects and the client CA reach the authorizer and the
			// authenticator a moment after they are created: poll.
			var code int
			var body []byte
			_ = wait.PollUntilContextTimeout(a.ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
				code, body = a.get(t, c.cert, c.token, c.path)
				return code == c.want, nil
			})
			if code != c.want {
				t.Errorf("GET %s: %d (%s), want %d", c.path, code, body, c.want)
			}
		})
	}
}

// TestAgentAPIEndpoints: the bodies antctl decodes.
func TestAgentAPIEndpoints(t *testing.T) {
	a := startAgentAPI(t, testQuerier())
	token := a.serviceAccountToken(t, "reader")
	a.bind(t, "antctl", rbacv1.Subject{Kind: "ServiceAccount", Name: "reader", Namespace: "default"})
	_ = wait.PollUntilContextTimeout(a.ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		code, _ := a.get(t, nil, token, "/podinterfaces")
		return code == http.StatusOK, nil
	})
	decode := func(path string, v any) {
		t.Helper()
		code, body := a.get(t, nil, token, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	var all, demo []apis.PodInterface
	decode("/podinterfaces", &all)
	if len(all) != 2 || all[0].PodNamespace != "data" || all[1].PodName != "web-0" {
		t.Errorf("/podinterfaces: %+v, want db-0 and web-0 (the gateway is no pod)", all)
	}
	decode("/podinterfaces?namespace=demo&name=web-0", &demo)
	if len(demo) != 1 || demo[0].OFPort != 5 || demo[0].MAC != "0a:00:00:00:00:01" || demo[0].IPs[0] != "10.10.0.5" {
		t.Errorf("/podinterfaces of demo/web-0: %+v", demo)
	}
	back, err := demo[0].InterfaceConfig()
	if err != nil || back.OFPort != 5 || back.PodName != "web-0" || !back.IPs[0].Equal(net.ParseIP("10.10.0.5")) {
		t.Errorf("InterfaceConfig: %+v %v", back, err)
	}
	var flows []apis.Flow
	decode("/ovsflows?table=3", &flows)
	if len(flows) != 1 || flows[0].Packets != 42 || flows[0].Table != 3 {
		t.Fatalf("/ovsflows: %+v", flows)
	}
	fs, err := flows[0].FlowStats()
	if err != nil || fs.Priority != 200 || fs.Cookie != 0x1000000001 || fs.PacketCount != 42 || fs.DurationSec != 7 {
		t.Errorf("FlowStats: %+v %v", fs, err)
	}
	if code, body := a.get(t, nil, token, "/ovsflows?table=Classifier"); code != http.StatusBadRequest {
		t.Errorf("/ovsflows?table=Classifier: %d %s, want 400", code, body)
	}
	var gates []apis.FeatureGate
	decode("/featuregates", &gates)
	if len(gates) != 1 || gates[0].Name != "AntreaProxy" || gates[0].Status != "Enabled" {
		t.Errorf("/featuregates: %+v", gates)
	}
}
