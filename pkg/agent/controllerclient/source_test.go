package controllerclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// The whole path (a real controller, kube-apiserver, tokens, TLS) is
// tested in pkg/controller/app (TestAgentsWatchTheControllerDirectly),
// where the Service is an ExternalName; here the EndpointSlices of a
// ClusterIP Service, as on a cluster.

func caPEM(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func slice(name string, port int32, endpoints map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: "antrea"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: &port}},
	}
	for ip, ready := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestTheTargetIsAReadyEndpointOfTheServiceAndFollowsItsChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca1 := caPEM(t, "one")
	kube := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: controlplane.CAConfigMapName},
			Data: map[string]string{controlplane.CAConfigMapKey: ca1}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "antrea"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.9",
				Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
		slice("antrea-a", 10349, map[string]bool{"172.30.0.12": false, "172.30.0.11": true}),
	)
	src := NewSource(kube)
	changes := make(chan struct{}, 10)
	src.onChange(func() { changes <- struct{}{} })
	go src.Run(ctx)
	want := func(what, addr, ca string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			tg := src.Target()
			return tg != nil && tg.Address == addr && string(tg.CA) == ca, nil
		})
		if err != nil {
			tg := src.Target()
			t.Fatalf("%s: target %+v, want %s", what, tg, addr)
		}
	}
	want("the ready endpoint, not the unready one nor the ClusterIP", "172.30.0.11:10349", ca1)

	// The controller restarted on another Node: the old endpoint goes.
	if _, err := kube.DiscoveryV1().EndpointSlices("kube-system").Update(ctx,
		slice("antrea-a", 10349, map[string]bool{"172.30.0.13": true}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("the new endpoint", "172.30.0.13:10349", ca1)

	// A second ready endpoint that sorts first does not move a working target.
	if _, err := kube.DiscoveryV1().EndpointSlices("kube-system").Create(ctx,
		slice("antrea-b", 10349, map[string]bool{"172.30.0.10": true}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	want("the current endpoint while it stays ready", "172.30.0.13:10349", ca1)

	ca2 := caPEM(t, "two")
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: controlplane.CAConfigMapName},
		Data:       map[string]string{controlplane.CAConfigMapKey: ca2}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("the rotated CA", "172.30.0.13:10349", ca2)

	// A ConfigMap without a certificate keeps the last good target.
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: controlplane.CAConfigMapName},
		Data:       map[string]string{controlplane.CAConfigMapKey: "not a certificate"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	want("the last good target after a bad ConfigMap", "172.30.0.13:10349", ca2)
	if n := len(changes); n != 3 {
		t.Errorf("%d changes announced to the transports, want 3 (first target, new endpoint, new CA)", n)
	}
}
