package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/controllerclient"
	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/app"
)

// runController runs antrea-controller's app.Run on ln with its
// self-signed certificate in certDir; stop ends it and waits.
func runController(t *testing.T, cp *apiservertest.ControlPlane, ln net.Listener, certDir string) (stop func()) {
	t.Helper()
	port := ln.Addr().(*net.TCPAddr).Port
	opts := app.NewOptions()
	opts.Kubeconfig = cp.Kubeconfig
	opts.Workers = 2
	opts.APIServer.SecureServing.Listener = ln
	opts.APIServer.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.APIServer.SecureServing.BindPort = port
	opts.APIServer.SecureServing.ServerCert.CertDirectory = certDir
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("antrea-controller did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// tokenOf is a config authenticating with a token of ServiceAccount
// kube-system/name (TokenRequest), as a Pod of it has.
func tokenOf(t *testing.T, ctx context.Context, kube kubernetes.Interface, admin *rest.Config, name string) *rest.Config {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", name, err)
	}
	c := rest.AnonymousClientConfig(admin)
	c.BearerToken = tr.Status.Token
	return c
}

// TestAgentsWatchTheControllerDirectly: with the aggregation of the
// controlplane API gone (no APIService: kube-apiserver cannot serve it),
// an agent's policy watchers, on the client of package controllerclient
// with the antrea-agent ServiceAccount's token, still list and watch their
// Node's span from antrea-controller; they follow a controller restarted
// with a new CA on a new port without being restarted themselves; a CA
// that did not sign the controller's certificate is refused, and so is a
// token of a ServiceAccount the chart grants nothing.
func TestAgentsWatchTheControllerDirectly(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp.ApplyAntrea(t, ctx, ln.Addr().(*net.TCPAddr).Port)
	agg := aggregatorclient.NewForConfigOrDie(cp.Config)
	for _, name := range []string{app.APIServiceName, app.StatsAPIServiceName} {
		if err := agg.ApiregistrationV1().APIServices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting APIService %s: %v", name, err)
		}
	}
	stop := runController(t, cp, ln, filepath.Join(cp.Dir, "serving-1"))

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ctx, kube, "web", "n1", "10.10.1.2", map[string]string{"app": "web"})
	denyAll := func(name string) {
		t.Helper()
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		if _, err := kube.NetworkingV1().NetworkPolicies("ns").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	denyAll("first")

	// The agent: its identity reads the Service, its EndpointSlices and the
	// CA ConfigMap (the chart's Role) and reaches the controller directly.
	agent := tokenOf(t, ctx, kube, cp.Config, "antrea-agent")
	src := controllerclient.NewSource(kubernetes.NewForConfigOrDie(agent))
	go src.Run(ctx)
	client, err := src.Clientset(agent)
	if err != nil {
		t.Fatal(err)
	}
	span := npcontroller.NewSpan("n1", client, nil)
	go span.Run(ctx)
	holds := func(source string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			for _, p := range span.State().Policies {
				if p.SourceRef.Name == source && len(p.AppliedTo) == 1 {
					return true, nil
				}
			}
			return false, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, holds("first")); err != nil {
		t.Fatalf("n1's agent never held policy ns/first from the controller directly: %v", err)
	}
	_, err = versioned.NewForConfigOrDie(cp.Config).ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("through kube-apiserver without the APIService: err = %v, want 404 (the agent's path does not go there)", err)
	}

	t.Run("a token of another ServiceAccount is refused by the controller's authorization", func(t *testing.T) {
		if _, err := kube.CoreV1().ServiceAccounts("kube-system").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "not-an-agent"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		other, err := src.Clientset(tokenOf(t, ctx, kube, cp.Config, "not-an-agent"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if !apierrors.IsForbidden(err) {
			t.Errorf("list as kube-system/not-an-agent: err = %v, want 403", err)
		}
		anonymous, err := src.Clientset(rest.AnonymousClientConfig(agent))
		if err != nil {
			t.Fatal(err)
		}
		_, err = anonymous.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Errorf("list without a token: err = %v, want 401 or 403", err)
		}
	})

	t.Run("a CA that did not sign the controller's certificate is refused", func(t *testing.T) {
		if _, err := kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "another-ca"},
			Data:       map[string]string{controlplane.CAConfigMapKey: string(selfSignedCA(t))},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wrong := controllerclient.NewSourceFor(kube, "kube-system", "antrea", "another-ca")
		go wrong.Run(ctx)
		select {
		case <-wrong.Ready():
		case <-ctx.Done():
			t.Fatal("the Source never read ConfigMap another-ca")
		}
		c, err := wrong.Clientset(agent)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("list verified with another CA: err = %v, want an unknown authority", err)
		}
	})

	t.Run("a controller restarted with a new CA on a new port is followed without restarting the agent", func(t *testing.T) {
		before, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, controlplane.CAConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		ln2, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		svc, err := kube.CoreV1().Services("kube-system").Get(ctx, "antrea", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports[0].Port = int32(ln2.Addr().(*net.TCPAddr).Port)
		if _, err := kube.CoreV1().Services("kube-system").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A fresh cert dir: a new self-signed CA, which the new process
		// publishes.
		runController(t, cp, ln2, filepath.Join(cp.Dir, "serving-2"))
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			after, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, controlplane.CAConfigMapName, metav1.GetOptions{})
			return err == nil && after.Data[controlplane.CAConfigMapKey] != before.Data[controlplane.CAConfigMapKey], nil
		})
		if err != nil {
			t.Fatalf("the new controller never published its new CA: %v", err)
		}
		denyAll("second")
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, holds("second")); err != nil {
			t.Fatalf("n1's agent never held policy ns/second from the new controller: %v (target %+v)", err, src.Target().Address)
		}
		if err := span.Connected(); err != nil {
			t.Errorf("n1's agent watches are not open: %v", err)
		}
	})
}

// selfSignedCA is the PEM of a CA that signed nothing the controller has.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not antrea's"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
