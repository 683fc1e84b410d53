// Package apiservertest starts a real kube-apiserver (controller-runtime
// envtest) configured for API aggregation, applies the project's manifests
// and registers the controlplane APIService, for integration tests and
// benchmarks of the controller's API.
package apiservertest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"encoding/pem"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apiserver"
)

// APIServiceName is the controlplane APIService of build/yamls.
const APIServiceName = "v1beta2.controlplane.antrea.io"

// ControlPlane is a running kube-apiserver with aggregation enabled.
type ControlPlane struct {
	// Env is the envtest environment (AddUser makes more users).
	Env *envtest.Environment
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Kubeconfig is a file holding Config.
	Kubeconfig string
	// Assets is the directory of etcd, kube-apiserver and perhaps kubectl.
	Assets string
	// Dir is a temporary directory removed at cleanup.
	Dir string
}

// RepoRoot is the module root.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Assets returns the directory with etcd and kube-apiserver, or skips.
func Assets(tb testing.TB) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "_output", "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			tb.Skipf("no %s in %s (run hack/install.sh or set KUBEBUILDER_ASSETS)", b, dir)
		}
	}
	return dir
}

// Start runs kube-apiserver with front-proxy (request-header) settings so it
// can proxy to an aggregated server, and stops it at cleanup.
func Start(tb testing.TB) *ControlPlane {
	tb.Helper()
	dir := Assets(tb)
	tmp := tb.TempDir()
	caFile, certFile, keyFile := frontProxyPKI(tb, tmp)
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
		tb.Fatalf("starting envtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stopping envtest: %v", err)
		}
	})
	cp := &ControlPlane{Env: env, Config: cfg, Assets: dir, Dir: tmp, Kubeconfig: filepath.Join(tmp, "admin.kubeconfig")}
	writeKubeconfig(tb, cfg, cp.Kubeconfig)
	return cp
}

// frontProxyPKI writes a front-proxy CA and the aggregator's client pair.
func frontProxyPKI(tb testing.TB, dir string) (caFile, certFile, keyFile string) {
	tb.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
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
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "front-proxy-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		tb.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	return write("front-proxy-ca.crt", "CERTIFICATE", caDER), write("front-proxy-client.crt", "CERTIFICATE", clientDER),
		write("front-proxy-client.key", "EC PRIVATE KEY", keyDER)
}

func writeKubeconfig(tb testing.TB, cfg *rest.Config, path string) {
	tb.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatal(err)
	}
}

// ApplyAntrea creates what antrea-controller needs in the API server: the
// ServiceAccounts, RBAC, CRDs (crd.antrea.io, established before it returns)
// and admission webhook configurations of build/yamls/antrea.yml (the
// product's manifest, so tests run with its least-privilege roles and its
// schemas), and the loopback registration of the controlplane APIService
// (apiserver.LoopbackRegistration) at port. The webhooks reach the
// controller through the loopback Service antrea, so their Service port is
// set to port.
func (cp *ControlPlane) ApplyAntrea(tb testing.TB, ctx context.Context, port int) {
	tb.Helper()
	manifest := filepath.Join(RepoRoot(), "build", "yamls", "antrea.yml")
	data, err := os.ReadFile(manifest)
	if err != nil {
		tb.Fatal(err)
	}
	cp.applyYAML(tb, ctx, manifest, data, func(obj k8sruntime.Object) bool {
		p := int32(port)
		switch o := obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.Role, *rbacv1.ClusterRoleBinding, *rbacv1.RoleBinding,
			*apiextensionsv1.CustomResourceDefinition:
			return true
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = &p
			}
			return true
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				o.Webhooks[i].ClientConfig.Service.Port = &p
			}
			return true
		}
		return false
	})
	cp.applyYAML(tb, ctx, "loopback APIService", apiserver.LoopbackRegistration(port), nil)
	cp.waitCRDsEstablished(tb, ctx)
}

// waitCRDsEstablished waits (at most a minute) until every CRD is Established.
func (cp *ControlPlane) waitCRDsEstablished(tb testing.TB, ctx context.Context) {
	tb.Helper()
	client := apiextensionsclient.NewForConfigOrDie(cp.Config)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		crds, err := client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, crd := range crds.Items {
			if !apiextensionshelpers.IsCRDConditionTrue(&crd, apiextensionsv1.Established) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		tb.Fatalf("the CRDs were never Established: %v", err)
	}
}

// applyYAML creates every object of a YAML stream that keep accepts (nil: all).
func (cp *ControlPlane) applyYAML(tb testing.TB, ctx context.Context, what string, data []byte, keep func(k8sruntime.Object) bool) {
	tb.Helper()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	c, err := ctrlclient.New(cp.Config, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw k8sruntime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue
		}
		obj, _, err := decoder.Decode(raw.Raw, nil, nil)
		if err != nil {
			tb.Fatalf("%s: decoding: %v", what, err)
		}
		if keep != nil && !keep(obj) {
			continue
		}
		if err := c.Create(ctx, obj.(ctrlclient.Object)); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("%s: creating %T: %v", what, obj, err)
		}
	}
}

// WaitAPIServiceAvailable waits (at most a minute) until kube-apiserver
// reports the APIService Available.
func (cp *ControlPlane) WaitAPIServiceAvailable(tb testing.TB, ctx context.Context) {
	tb.Helper()
	agg := aggregatorclient.NewForConfigOrDie(cp.Config)
	var last apiregistrationv1.APIServiceStatus
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = s.Status
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tb.Fatalf("APIService never became Available: %v; status %+v", err, last)
	}
}
