package ui

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/app"
)

// The cluster of the API and browser tests: a real kube-apiserver and etcd
// (pkg/apiserver/apiservertest) with the manifest's CRDs, RBAC and
// webhooks, the real antrea-controller in this process (static Tiers,
// admission, its AntreaControllerInfo heartbeat, the Traceflow controller,
// the stats API), and the test playing two agents: their AntreaAgentInfos
// (node-1 heartbeating, node-2 silent for ten minutes) and the Traceflow
// results of the agent of node-1, which drops client → web by an ACNP rule.
// The UI runs as a user holding exactly the chart's antrea-ui rules.

const (
	demoNS    = "demo"
	denyACNP  = "deny-client-to-web"
	denyRule  = "drop-client"
	tfDropObs = "AntreaClusterNetworkPolicy:" + denyACNP
)

type uiCluster struct {
	cp    *apiservertest.ControlPlane
	admin *kubernetes.Clientset
	crd   *versioned.Clientset
	// ui serves the UI as the antrea-ui rules' user.
	ui *httptest.Server
	// uiConfig is that user's client config.
	uiConfig *rest.Config
	// uiKubeconfig is the same as a kubeconfig.
	uiKubeconfig []byte
	ctx          context.Context
}

// startUICluster starts it all and stops it at cleanup.
func startUICluster(t *testing.T) *uiCluster {
	t.Helper()
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	c := &uiCluster{cp: cp, ctx: ctx, admin: kubernetes.NewForConfigOrDie(cp.Config), crd: versioned.NewForConfigOrDie(cp.Config)}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.admin.CoreV1().Namespaces().Get(ctx, query.AntreaNamespace, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("namespace kube-system never appeared: %v", err)
	}
	c.startController(t)
	c.seed(t)
	c.startUI(t)
	agentCtx, stopAgent := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.playAgent(agentCtx, t) }()
	t.Cleanup(func() { stopAgent(); <-done })
	return c
}

func (c *uiCluster) startController(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	c.cp.ApplyAntrea(t, c.ctx, port)
	kubeconfig := filepath.Join(t.TempDir(), "controller.kubeconfig")
	user, err := c.cp.Env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := app.NewOptions()
	opts.Kubeconfig = kubeconfig
	opts.APIServer.SecureServing.Listener = ln
	opts.APIServer.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.APIServer.SecureServing.BindPort = port
	opts.APIServer.SecureServing.ServerCert.CertDirectory = filepath.Join(t.TempDir(), "serving")
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, opts) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("antrea-controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("antrea-controller did not stop")
		}
	})
	c.cp.WaitAPIServiceAvailable(t, c.ctx)
	// The controller creates the static Tiers at start, not before the
	// APIService is Available: wait for them.
	if err := wait.PollUntilContextCancel(c.ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := c.crd.CrdV1beta1().Tiers().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) >= len(crdv1beta1.StaticTiers), nil
	}); err != nil {
		t.Fatalf("the controller never created the static Tiers: %v", err)
	}
}

func (c *uiCluster) must(t *testing.T, err error) {
	t.Helper()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// seed creates the Nodes' agents' reports, the demo Pods and Service, the
// policies and the antrea-config ConfigMap.
func (c *uiCluster) seed(t *testing.T) {
	t.Helper()
	ctx := c.ctx
	now := time.Now()
	// Nodes first: the controller deletes the AntreaAgentInfo of a Node
	// that does not exist.
	for _, n := range []string{"node-1", "node-2"} {
		_, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		c.must(t, err)
	}
	for _, a := range []struct {
		node string
		beat time.Time
		pods int32
	}{{"node-1", now, 2}, {"node-2", now.Add(-10 * time.Minute), 1}} {
		info := &crdv1beta1.AntreaAgentInfo{ObjectMeta: metav1.ObjectMeta{Name: a.node}, Version: "v2.6.0-dev",
			PodRef:  corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "antrea-agent-" + a.node},
			NodeRef: corev1.ObjectReference{Kind: "Node", Name: a.node}, NodeSubnets: []string{"10.10.0.0/24"},
			OVSInfo:     crdv1beta1.OVSInfo{Version: "3.6.1", BridgeName: "br-int", FlowTable: flowTable(a.pods)},
			LocalPodNum: a.pods, NetworkPolicyControllerInfo: crdv1beta1.NetworkPolicyControllerInfo{NetworkPolicyNum: 1}}
		for _, ct := range []crdv1beta1.AgentConditionType{crdv1beta1.AgentHealthy, crdv1beta1.ControllerConnectionUp,
			crdv1beta1.OVSDBConnectionUp, crdv1beta1.OpenflowConnectionUp} {
			info.AgentConditions = append(info.AgentConditions, crdv1beta1.AgentCondition{Type: ct, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.NewTime(a.beat)})
		}
		_, err := c.crd.CrdV1beta1().AntreaAgentInfos().Create(ctx, info, metav1.CreateOptions{})
		c.must(t, err)
	}
	_, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}, metav1.CreateOptions{})
	c.must(t, err)
	for _, p := range []struct{ name, node, ip, app string }{{"client", "node-1", "10.10.1.2", "client"}, {"web", "node-1", "10.10.1.3", "web"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: demoNS, Name: p.name, Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
		created, err := c.admin.CoreV1().Pods(demoNS).Create(ctx, pod, metav1.CreateOptions{})
		c.must(t, err)
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}}}
		_, err = c.admin.CoreV1().Pods(demoNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		c.must(t, err)
	}
	_, err = c.admin.CoreV1().Services(demoNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: demoNS, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	c.must(t, err)
	drop := crdv1beta1.RuleActionDrop
	acnp := &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: denyACNP},
		Spec: crdv1beta1.ClusterNetworkPolicySpec{Tier: "securityops", Priority: 5,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ingress: []crdv1beta1.Rule{{Name: denyRule, Action: &drop,
				From: []crdv1beta1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}}}}
	_, err = c.crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, acnp, metav1.CreateOptions{})
	c.must(t, err)
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: demoNS, Name: "web-from-client"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}
	_, err = c.admin.NetworkingV1().NetworkPolicies(demoNS).Create(ctx, np, metav1.CreateOptions{})
	c.must(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: query.AntreaNamespace, Name: query.AntreaConfigMap},
		Data: map[string]string{"antrea-agent.conf": "featureGates:\n  AntreaProxy: true\n  FlowExporter: false\n",
			"antrea-controller.conf": "featureGates: {}\n"}}
	_, err = c.admin.CoreV1().ConfigMaps(query.AntreaNamespace).Create(ctx, cm, metav1.CreateOptions{})
	c.must(t, err)
}

// flowTable is a plausible ovsInfo.flowTable: a few flows in every table,
// more per Pod in the per-Pod tables.
func flowTable(pods int32) map[string]int32 {
	out := map[string]int32{}
	for id := 0; id < 40; id++ {
		out[strconv.Itoa(id)] = int32(2 + (id*7)%5 + int(pods)*(id%3))
	}
	return out
}

// chartRules reads the antrea-ui rules the chart renders.
func chartRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(apiservertest.RepoRoot(), "build", "charts", "antrea", "conf", file))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rules
}

// userConfig adds a user (no rights unless bound) and returns its client
// config and kubeconfig.
func (c *uiCluster) userConfig(t *testing.T, name string) (*rest.Config, []byte) {
	t.Helper()
	u, err := c.cp.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return u.Config(), kc
}

// startUI binds the chart's antrea-ui rules to user antrea-ui and serves the
// UI as that user.
func (c *uiCluster) startUI(t *testing.T) {
	t.Helper()
	const user = "system:serviceaccount:kube-system:antrea-ui"
	rbac := c.admin.RbacV1()
	_, err := rbac.ClusterRoles().Create(c.ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "antrea-ui"},
		Rules: chartRules(t, "antrea-ui-clusterrole-rules.yaml")}, metav1.CreateOptions{})
	c.must(t, err)
	_, err = rbac.ClusterRoleBindings().Create(c.ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "antrea-ui"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-ui"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}, metav1.CreateOptions{})
	c.must(t, err)
	_, err = rbac.Roles(query.AntreaNamespace).Create(c.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "antrea-ui"},
		Rules: chartRules(t, "antrea-ui-role-rules.yaml")}, metav1.CreateOptions{})
	c.must(t, err)
	_, err = rbac.RoleBindings(query.AntreaNamespace).Create(c.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "antrea-ui"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "antrea-ui"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}, metav1.CreateOptions{})
	c.must(t, err)
	c.uiConfig, c.uiKubeconfig = c.userConfig(t, user)
	c.ui = c.serveAs(t, c.uiConfig)
	// The Secret the UI created, with its initial password, replaced by
	// the test's.
	if _, err := c.admin.CoreV1().Secrets(query.AntreaNamespace).Get(c.ctx, DefaultSecretName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the UI did not create its admin Secret: %v", err)
	}
	srv := New(Config{Clients: &query.Clients{Kube: c.admin}})
	if err := srv.password.set(c.ctx, testPassword); err != nil {
		t.Fatal(err)
	}
}

// serveAs runs a UI server whose clients use cfg, with token login on;
// more changes the rest of its Config.
func (c *uiCluster) serveAs(t *testing.T, cfg *rest.Config, more ...func(*Config)) *httptest.Server {
	t.Helper()
	clients, err := query.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := Config{Clients: clients, RESTConfig: cfg, TokenLogin: true}
	for _, m := range more {
		m(&conf)
	}
	s := New(conf)
	if err := s.Start(c.ctx); err != nil && !apierrors.IsForbidden(err) {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

// playAgent is node-1's agent for Traceflows: once the controller tagged
// one (Running), it reports the packet dropped by the ACNP's rule.
func (c *uiCluster) playAgent(ctx context.Context, t *testing.T) {
	tfs := c.crd.CrdV1beta1().Traceflows()
	for ctx.Err() == nil {
		l, err := tfs.List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, tf := range l.Items {
				if tf.Status.Phase != crdv1beta1.TraceflowRunning || len(tf.Status.Results) > 0 {
					continue
				}
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur, err := tfs.Get(ctx, tf.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					cur.Status.Results = []crdv1beta1.NodeResult{{Node: "node-1", Role: crdv1beta1.RoleSender, Timestamp: time.Now().Unix(),
						Observations: []crdv1beta1.Observation{
							{Component: crdv1beta1.ComponentSpoofGuard, ComponentInfo: "SpoofGuard", Action: crdv1beta1.ActionForwarded},
							{Component: crdv1beta1.ComponentForwarding, ComponentInfo: "L3Forwarding", Action: crdv1beta1.ActionForwarded},
							{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: "AntreaPolicyIngressRule", Action: crdv1beta1.ActionDropped,
								NetworkPolicy: tfDropObs, NetworkPolicyRule: denyRule},
						}}}
					_, err = tfs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
					return err
				})
				if err != nil && ctx.Err() == nil {
					t.Logf("playing the agent of Traceflow %s: %v", tf.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
