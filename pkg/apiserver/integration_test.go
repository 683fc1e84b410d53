package apiserver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/app"
	"antrea.io/antrea/pkg/controller/types"
)

// repoRoot is the module root, found from this file's path.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// assets returns the directory with etcd and kube-apiserver, or skips.
func assets(t *testing.T) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "_output", "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Skipf("no %s in %s (run hack/install.sh or set KUBEBUILDER_ASSETS)", b, dir)
		}
	}
	return dir
}

// frontProxyPKI writes a front-proxy CA and the aggregator's client pair.
func frontProxyPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, clientKey := newKey(), newKey()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "front-proxy-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("front-proxy-ca.crt", "CERTIFICATE", caDER), write("front-proxy-client.crt", "CERTIFICATE", clientDER),
		write("front-proxy-client.key", "EC PRIVATE KEY", keyDER)
}

func writeKubeconfig(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// applyManifest creates every object of a build/yamls file.
func applyManifest(t *testing.T, ctx context.Context, c ctrlclient.Client, scheme *k8sruntime.Scheme, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "build", "yamls", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	codecs := serializer.NewCodecFactory(scheme)
	for {
		var raw k8sruntime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		obj, _, err := codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			t.Fatalf("%s: decoding: %v", file, err)
		}
		if err := c.Create(ctx, obj.(ctrlclient.Object)); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: creating %T: %v", file, obj, err)
		}
	}
}

type harness struct {
	ctx        context.Context
	stores     *apiserver.Stores
	port       int
	adminCfg   *rest.Config
	kubeconfig string
	env        *envtest.Environment
	assets     string
}

// startControlPlane starts kube-apiserver (aggregation enabled) and our API
// server on loopback, applies the manifests and waits for the APIService.
func startControlPlane(t *testing.T) *harness {
	dir := assets(t)
	tmp := t.TempDir()
	caFile, certFile, keyFile := frontProxyPKI(t, tmp)
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("requestheader-client-ca-file", caFile)
	args.Set("requestheader-allowed-names", "front-proxy-client")
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", certFile)
	args.Set("proxy-client-key-file", keyFile)
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	h := &harness{adminCfg: cfg, env: env, assets: dir, kubeconfig: filepath.Join(tmp, "admin.kubeconfig")}
	writeKubeconfig(t, cfg, h.kubeconfig)

	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.port = ln.Addr().(*net.TCPAddr).Port
	opts := apiserver.NewOptions()
	opts.SecureServing.Listener = ln
	opts.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.SecureServing.BindPort = h.port
	opts.SecureServing.ServerCert.CertDirectory = filepath.Join(tmp, "serving")
	h.stores = apiserver.NewStores()
	server, err := apiserver.New(opts, h.kubeconfig, h.stores, nil)
	if err != nil {
		cancel()
		t.Fatalf("apiserver.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("server did not stop")
		}
	})

	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiregistrationv1.AddToScheme(scheme)
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"antrea-controller-rbac.yaml", "antrea-agent-rbac.yaml", "antrea-apiservice.yaml"} {
		applyManifest(t, ctx, c, scheme, f)
	}
	// The manifest names the production port; on loopback ours is dynamic.
	agg := aggregatorclient.NewForConfigOrDie(cfg)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, app.APIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		port := int32(h.port)
		svc.Spec.Service.Port = &port
		_, err = agg.ApiregistrationV1().APIServices().Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting the APIService port: %v", err)
	}
	ca, err := server.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	if err := app.SetAPIServiceCABundle(ctx, agg, app.APIServiceName, ca); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, app.APIServiceName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s, _ := agg.ApiregistrationV1().APIServices().Get(ctx, app.APIServiceName, metav1.GetOptions{})
		t.Fatalf("APIService never became Available: %v; status %+v", err, s.Status)
	}
	return h
}

func member(name, ip string) *controlplane.GroupMember {
	return &controlplane.GroupMember{Pod: &controlplane.PodReference{Namespace: "ns", Name: name},
		IPs: []controlplane.IPAddress{controlplane.IPAddress(net.ParseIP(ip).To4())}}
}

func atg(byNode map[string][]*controlplane.GroupMember) *types.AppliedToGroup {
	g := &types.AppliedToGroup{Name: "atg", UID: "atg", SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()},
		GroupMemberByNode: map[string]controlplane.GroupMemberSet{}}
	for n, ms := range byNode {
		g.NodeNames.Insert(n)
		g.GroupMemberByNode[n] = controlplane.NewGroupMemberSet(ms...)
	}
	return g
}

func TestControlplaneAPIThroughKubeAPIServer(t *testing.T) {
	h := startControlPlane(t)
	ctx := h.ctx

	agentUser, err := h.env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-agent", Groups: []string{"system:serviceaccounts"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := versioned.NewForConfigOrDie(agentUser.Config())
	strangerUser, err := h.env.AddUser(envtest.User{Name: "stranger"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger := versioned.NewForConfigOrDie(strangerUser.Config())

	t.Run("anonymous requests are refused by our server and through kube-apiserver", func(t *testing.T) {
		insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for _, url := range []string{
			fmt.Sprintf("https://127.0.0.1:%d/apis/controlplane.antrea.io/v1beta2/networkpolicies", h.port),
			h.adminCfg.Host + "/apis/controlplane.antrea.io/v1beta2/networkpolicies",
		} {
			resp, err := insecure.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s anonymously: %d, want 401 or 403", url, resp.StatusCode)
			}
		}
	})

	t.Run("a user without the agent role is forbidden", func(t *testing.T) {
		_, err := stranger.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("List as stranger: %v, want Forbidden", err)
		}
	})

	if err := h.stores.AppliedToGroups.Create(atg(map[string][]*controlplane.GroupMember{
		"n1": {member("a", "10.10.1.1")}, "n2": {member("b", "10.10.2.1")}})); err != nil {
		t.Fatal(err)
	}
	np := &types.NetworkPolicy{Name: "np", UID: "np", Generation: 1, SpanMeta: types.SpanMeta{NodeNames: sets.New("n1", "n2")},
		AppliedToGroups: []string{"atg"},
		SourceRef:       &controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: "ns", Name: "deny"},
		Rules:           []controlplane.NetworkPolicyRule{{Direction: controlplane.DirectionIn}}}
	if err := h.stores.NetworkPolicies.Create(np); err != nil {
		t.Fatal(err)
	}

	t.Run("the agent lists only its node's slice with nodeName", func(t *testing.T) {
		for _, tc := range []struct {
			selector string
			want     int
		}{{"nodeName=n1", 1}, {"nodeName=n3", 0}, {"", 1}} {
			l, err := agent.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("List(%q): %v", tc.selector, err)
			}
			if len(l.Items) != tc.want {
				t.Errorf("List(%q) = %d policies, want %d", tc.selector, len(l.Items), tc.want)
			}
		}
		l, err := agent.ControlplaneV1beta2().AppliedToGroups().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil || len(l.Items) != 1 || len(l.Items[0].GroupMembers) != 1 || l.Items[0].GroupMembers[0].Pod.Name != "a" {
			t.Fatalf("AppliedToGroups for n1 = %+v, %v; want atg with member a only", l, err)
		}
	})

	t.Run("a watcher of n1 gets nothing for n2's pods and a patch for its own", func(t *testing.T) {
		w, err := agent.ControlplaneV1beta2().AppliedToGroups().Watch(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		next := func() watch.Event {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				return ev
			case <-time.After(10 * time.Second):
				t.Fatal("no watch event")
			}
			return watch.Event{}
		}
		if ev := next(); ev.Type != watch.Added {
			t.Fatalf("first event %s, want ADDED", ev.Type)
		}
		// Pods on n2 change, then a pod on n1: the next event n1 sees must be
		// its own patch, proving the n2 change sent it nothing.
		if err := h.stores.AppliedToGroups.Update(atg(map[string][]*controlplane.GroupMember{
			"n1": {member("a", "10.10.1.1")}, "n2": {member("b", "10.10.2.1"), member("c", "10.10.2.2")}})); err != nil {
			t.Fatal(err)
		}
		if err := h.stores.AppliedToGroups.Update(atg(map[string][]*controlplane.GroupMember{
			"n1": {member("a", "10.10.1.1"), member("d", "10.10.1.2")}, "n2": {member("b", "10.10.2.1"), member("c", "10.10.2.2")}})); err != nil {
			t.Fatal(err)
		}
		ev := next()
		patch, ok := ev.Object.(*v1beta2.AppliedToGroupPatch)
		if ev.Type != watch.Modified || !ok {
			t.Fatalf("got %s %T, want MODIFIED AppliedToGroupPatch", ev.Type, ev.Object)
		}
		if len(patch.AddedGroupMembers) != 1 || patch.AddedGroupMembers[0].Pod.Name != "d" || len(patch.RemovedGroupMembers) != 0 {
			t.Fatalf("patch = %+v, want only d added", patch)
		}
	})

	t.Run("agents report realization and kubectl shows it", func(t *testing.T) {
		_, err := agent.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, "np", &v1beta2.NetworkPolicyStatus{
			ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Nodes:      []v1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 1}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("UpdateStatus: %v", err)
		}
		_, err = agent.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, "missing", &v1beta2.NetworkPolicyStatus{
			Nodes: []v1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 1}}}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("UpdateStatus of a missing policy: %v, want NotFound", err)
		}
		raw, err := agent.ControlplaneV1beta2().RESTClient().Get().Resource("networkpolicies").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		if len(table.Rows) != 1 || table.Rows[0].Cells[4] != "1/2" {
			t.Fatalf("table rows %+v, want np realized 1/2", table.Rows)
		}
		kubectl := filepath.Join(h.assets, "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skip("no kubectl next to kube-apiserver")
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", h.kubeconfig, "get", "networkpolicies.controlplane.antrea.io").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "K8sNetworkPolicy:ns/deny") || !strings.Contains(string(out), "1/2") {
			t.Fatalf("kubectl get printed:\n%s\nwant the source and 1/2", out)
		}
		t.Logf("kubectl get networkpolicies.controlplane.antrea.io:\n%s", out)
	})
}
