package antctl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// TestRemoteModeReadsTheAgentAPI: from a laptop (no agent conf file),
// antctl get podinterface|ovsflows --node NODE (or -p POD) dials NODE's
// InternalIP on antrea-config's apiPort with the kubeconfig's token, and
// prints what local mode prints on that node; a user without the antctl
// ClusterRole is told so. Real OVS, real kube-apiserver (envtest) with the
// chart's RBAC, the real agent API server.
func TestRemoteModeReadsTheAgentAPI(t *testing.T) {
	n := newNode(t)
	n.addPod(t, web0)
	n.addPod(t, client)
	conf, err := agentconfig.Load(filepath.Join(n.configDir, agentconfig.FileName))
	if err != nil {
		t.Fatal(err)
	}
	local := &localNode{conf: conf}

	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cp.ApplyAntrea(t, ctx, port+1)
	o := agentapi.NewOptions(port)
	o.SecureServing.Listener = ln
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.WithKubeAPIServer(cp.Kubeconfig, nil)
	store, err := local.interfaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	server, err := agentapi.New(o, &agentapi.Querier{NodeName: "node-1", Interfaces: store,
		DumpFlows: func(ctx context.Context, table uint8) ([]openflow.FlowStats, error) {
			return local.dumpFlows(ctx, table)
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the agent API server did not stop")
		}
	})

	// The cluster: node-1 at 127.0.0.1, its pods, antrea-config with the
	// agent API's port, and ServiceAccounts with and without antctl's role.
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if node, err = kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{web0, client} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}},
			metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		kp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, kp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: antreaNamespace, Name: antreaConfigMap},
		Data: map[string]string{agentconfig.FileName: fmt.Sprintf("apiPort: %d\n", port)}}
	if _, err := kube.CoreV1().ConfigMaps(antreaNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfigOf := func(sa string, bind bool) string {
		if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// antctl also reads Nodes, Pods and the ConfigMap through
		// kube-apiserver: the role below grants what antctl's needs.
		roles := []string{"view-antrea-config"}
		if bind {
			roles = append(roles, "antctl")
		}
		for _, role := range roles {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "default"}}}
			if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
		cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		cfg.CurrentContext = "c"
		path := filepath.Join(t.TempDir(), sa+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	viewer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view-antrea-config"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "nodes", "pods"}, Verbs: []string{"get", "list"}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, viewer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed, denied := kubeconfigOf("alice", true), kubeconfigOf("mallory", false)

	laptop := func(kubeconfig string, args ...string) result {
		var out, errb bytes.Buffer
		cmd := NewCommand(Env{Out: &out, Err: &errb})
		cmd.SetArgs(append(args, "--kubeconfig", kubeconfig, "--config-dir", t.TempDir()))
		err := cmd.ExecuteContext(ctx)
		return result{out: out.String(), err: errb.String(), runErr: err}
	}
	// RBAC reaches the authorizer a moment after it is created.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return laptop(allowed, "get", "podinterface", "--node", "node-1").runErr == nil, nil
	})

	same := func(t *testing.T, args ...string) {
		t.Helper()
		want := n.antctl(t, nil, args...)
		if want.runErr != nil {
			t.Fatalf("local mode %v: %v", args, want.runErr)
		}
		got := laptop(allowed, args...)
		if got.runErr != nil {
			t.Fatalf("remote %v: %v", args, got.runErr)
		}
		norm := withoutStats
		if args[1] == "podinterface" {
			norm = func(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
		}
		if g, w := norm(got.out), norm(want.out); len(w) == 0 || !slices.Equal(g, w) {
			t.Errorf("antctl %v from a laptop printed\n%s\nlocal mode prints\n%s", args, got.out, want.out)
		}
	}
	t.Run("podinterface --node", func(t *testing.T) {
		r := laptop(allowed, "get", "podinterface", "--node", "node-1")
		if r.runErr != nil || !strings.Contains(r.out, web0.Name) || !strings.Contains(r.out, client.Name) {
			t.Fatalf("got %q %v, want both pods", r.out, r.runErr)
		}
		want := n.antctl(t, nil, "get", "podinterface")
		if r.out != want.out {
			t.Errorf("remote:\n%s\nlocal:\n%s", r.out, want.out)
		}
	})
	t.Run("ovsflows -T Classifier --node", func(t *testing.T) {
		want := withoutStats(n.antctl(t, nil, "get", "ovsflows", "-T", "Classifier").out)
		r := laptop(allowed, "get", "ovsflows", "-T", "Classifier", "--node", "node-1")
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		if got := withoutStats(r.out); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("remote:\n%s\nlocal:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("ovsflows -p POD finds the pod's node", func(t *testing.T) {
		same(t, "get", "ovsflows", "-p", web0.Name, "-n", web0.Namespace)
	})
	t.Run("a user without the antctl ClusterRole is told", func(t *testing.T) {
		r := laptop(denied, "get", "ovsflows", "--node", "node-1")
		if r.runErr == nil || !strings.Contains(r.runErr.Error(), "403 Forbidden") || !strings.Contains(r.runErr.Error(), "antctl ClusterRole") {
			t.Errorf("got %v, want a 403 naming the antctl ClusterRole", r.runErr)
		}
	})
	t.Run("an unknown node is named with the closest one", func(t *testing.T) {
		r := laptop(allowed, "get", "podinterface", "--node", "node-2")
		if r.runErr == nil || !strings.Contains(r.runErr.Error(), `"node-2"`) || !strings.Contains(r.runErr.Error(), "node-1") {
			t.Errorf("got %v", r.runErr)
		}
	})
	t.Run("without --node or -p the error says how", func(t *testing.T) {
		r := laptop(allowed, "get", "ovsflows")
		if r.runErr == nil || !strings.Contains(r.runErr.Error(), "--node") {
			t.Errorf("got %v", r.runErr)
		}
	})
}
