package bgp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
)

// fakeSpeaker records what the controller asks of the speaker.
type fakeSpeaker struct {
	calls []string
}

func (f *fakeSpeaker) Start(_ context.Context, g Global) error {
	f.calls = append(f.calls, fmt.Sprintf("start as %d on %s:%d id %s", g.ASN, g.ListenAddress, g.ListenPort, g.RouterID))
	return nil
}
func (f *fakeSpeaker) Stop(context.Context) error { f.calls = append(f.calls, "stop"); return nil }
func (f *fakeSpeaker) AddPeer(_ context.Context, p Peer) error {
	f.calls = append(f.calls, fmt.Sprintf("add peer %s:%d as %d password %q from %s", p.Address, p.Port, p.ASN, p.Password, p.LocalAddress))
	return nil
}
func (f *fakeSpeaker) DeletePeer(_ context.Context, a netip.Addr) error {
	f.calls = append(f.calls, "delete peer "+a.String())
	return nil
}
func (f *fakeSpeaker) Advertise(_ context.Context, p netip.Prefix) error {
	f.calls = append(f.calls, "advertise "+p.String())
	return nil
}
func (f *fakeSpeaker) Withdraw(_ context.Context, p netip.Prefix) error {
	f.calls = append(f.calls, "withdraw "+p.String())
	return nil
}
func (f *fakeSpeaker) Peers(context.Context) ([]PeerStatus, error) { return nil, nil }

func (f *fakeSpeaker) take() []string {
	c := f.calls
	f.calls = nil
	return c
}

type controllerTest struct {
	t                                         *testing.T
	c                                         *Controller
	speaker                                   *fakeSpeaker
	policies, nodes, services, slices, secret cache.Indexer
	recorder                                  *record.FakeRecorder
}

func newControllerTest(t *testing.T) *controllerTest {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	ct := &controllerTest{t: t, speaker: &fakeSpeaker{}, policies: idx(), nodes: idx(), services: idx(), slices: idx(), secret: idx(),
		recorder: record.NewFakeRecorder(10)}
	ct.c = NewController(Config{NodeName: "n1", NodeIP: netip.MustParseAddr("172.30.0.11"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
		Policies: crdlisters.NewBGPPolicyLister(ct.policies), Nodes: corelisters.NewNodeLister(ct.nodes),
		Services: corelisters.NewServiceLister(ct.services), Slices: discoverylisters.NewEndpointSliceLister(ct.slices),
		Secrets: corelisters.NewSecretLister(ct.secret).Secrets("kube-system"), Recorder: ct.recorder, Speaker: ct.speaker})
	_ = ct.nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"bgp": "enabled"}}})
	return ct
}

// sync syncs and returns the speaker's calls, in order.
func (ct *controllerTest) sync() []string {
	ct.t.Helper()
	if err := ct.c.sync(context.Background()); err != nil {
		ct.t.Fatal(err)
	}
	return ct.speaker.take()
}

func expectCalls(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", step, got, want)
	}
}

func TestControllerKeepsTheSpeakerAsThePolicyInEffectSays(t *testing.T) {
	ct := newControllerTest(t)
	expectCalls(t, "no policy: the speaker is not started", ct.sync())

	p := policy("lab", time.Hour, map[string]string{"bgp": "enabled"})
	p.Spec.Advertisements = crdv1alpha1.Advertisements{Pod: &crdv1alpha1.PodAdvertisement{},
		Service: &crdv1alpha1.ServiceAdvertisement{IPTypes: []crdv1alpha1.ServiceIPType{crdv1alpha1.ServiceIPTypeClusterIP}}}
	p.Spec.BGPPeers = []crdv1alpha1.BGPPeer{{Address: "172.30.0.4", ASN: 65000}}
	_ = ct.policies.Add(p)
	_ = ct.secret.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: crdv1alpha1.BGPPasswordsSecret},
		Data: map[string][]byte{"172.30.0.4-65000": []byte("s3cret")}})
	web := svc("web", corev1.ServiceTypeClusterIP, "10.96.0.10")
	_ = ct.services.Add(web)
	expectCalls(t, "a policy selects the node: started, its peer with its password, its routes", ct.sync(),
		"start as 64512 on 172.30.0.11:179 id 172.30.0.11",
		`add peer 172.30.0.4:179 as 65000 password "s3cret" from 172.30.0.11`,
		"advertise 10.10.1.0/24", "advertise 10.96.0.10/32")
	expectCalls(t, "nothing changed: nothing asked", ct.sync())

	_ = ct.services.Add(svc("db", corev1.ServiceTypeClusterIP, "10.96.0.9"))
	_ = ct.services.Delete(web)
	expectCalls(t, "a Service replaced by another: its route withdrawn, the new one advertised", ct.sync(),
		"withdraw 10.96.0.10/32", "advertise 10.96.0.9/32")

	p = p.DeepCopy()
	p.Spec.BGPPeers = append(p.Spec.BGPPeers, crdv1alpha1.BGPPeer{Address: "172.30.0.5", ASN: 65001, Port: ptr.To[int32](1179)})
	_ = ct.policies.Update(p)
	expectCalls(t, "a peer added: only it is added", ct.sync(), `add peer 172.30.0.5:1179 as 65001 password "" from 172.30.0.11`)

	p = p.DeepCopy()
	p.Spec.BGPPeers[1].MultihopTTL = ptr.To[int32](2)
	_ = ct.policies.Update(p)
	expectCalls(t, "a peer changed: it is replaced", ct.sync(), "delete peer 172.30.0.5", `add peer 172.30.0.5:1179 as 65001 password "" from 172.30.0.11`)

	p = p.DeepCopy()
	p.Spec.LocalASN = 64513
	_ = ct.policies.Update(p)
	expectCalls(t, "the ASN changed: the speaker restarts with its peers and routes", ct.sync(),
		"stop", "start as 64513 on 172.30.0.11:179 id 172.30.0.11",
		`add peer 172.30.0.4:179 as 65000 password "s3cret" from 172.30.0.11`, `add peer 172.30.0.5:1179 as 65001 password "" from 172.30.0.11`,
		"advertise 10.10.1.0/24", "advertise 10.96.0.9/32")
	if st, err := ct.c.PolicyState(); err != nil || st.BGPPolicyName != "lab" || st.LocalASN != 64513 || st.ListenPort != 179 {
		t.Errorf("policy state: %+v, %v", st, err)
	}
	if rs, err := ct.c.RouteStates(); err != nil || len(rs) != 2 || rs[1].Type != string(RouteServiceClusterIP) || rs[1].K8sObjRef != "ns/db" {
		t.Errorf("route states: %+v, %v", rs, err)
	}

	younger := policy("younger", time.Minute, nil)
	younger.Spec.LocalASN = 65100
	_ = ct.policies.Add(younger)
	expectCalls(t, "a younger policy selecting the node too: nothing changes", ct.sync())
	select {
	case ev := <-ct.recorder.Events:
		if !strings.Contains(ev, "BGPPolicyNotEffective") || !strings.Contains(ev, "lab") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no Event on the ignored policy")
	}
	ct.sync()
	select {
	case ev := <-ct.recorder.Events:
		t.Errorf("the ignored policy reported twice: %q", ev)
	default:
	}

	_ = ct.policies.Delete(p)
	expectCalls(t, "the policy in effect deleted: the younger one takes over (another ASN: restart)", ct.sync()[:2],
		"stop", "start as 65100 on 172.30.0.11:179 id 172.30.0.11")
	_ = ct.policies.Delete(younger)
	expectCalls(t, "no policy left: the speaker stops", ct.sync(), "stop")
	if _, err := ct.c.RouteStates(); err != ErrNoPolicy {
		t.Errorf("without a policy the routes query says %v", err)
	}
}

func TestRouterID(t *testing.T) {
	ip := netip.MustParseAddr("172.30.0.11")
	annotated := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RouterIDAnnotation: "192.0.2.7"}}}
	badAnnotation := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{RouterIDAnnotation: "fd00::1"}}}
	if got := routerID(annotated, "n1", ip); got != "192.0.2.7" {
		t.Errorf("the annotation is the router ID: got %s", got)
	}
	if got := routerID(badAnnotation, "n1", ip); got != "172.30.0.11" {
		t.Errorf("an annotation that is no IPv4 address is ignored: got %s", got)
	}
	v6 := netip.MustParseAddr("fd00::11")
	a, b := routerID(nil, "n1", v6), routerID(nil, "n2", v6)
	if a == b || !netip.MustParseAddr(a).Is4() {
		t.Errorf("IPv6-only: a hash of the name as an IPv4 address, distinct per node: %s, %s", a, b)
	}
}

func TestAgentAPIAnswersTheQueries(t *testing.T) {
	ct := newControllerTest(t)
	h := ct.c.Handlers()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h[path].ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, path := range []string{PolicyPath, PeersPath, RoutesPath} {
		if code, body := get(path); code != http.StatusNotFound || !strings.Contains(body, "no effective BGPPolicy") {
			t.Errorf("%s without a policy: %d %q, want 404 saying so", path, code, body)
		}
	}
	p := policy("lab", time.Hour, nil)
	p.Spec.Advertisements.Pod = &crdv1alpha1.PodAdvertisement{}
	_ = ct.policies.Add(p)
	ct.sync()
	if code, body := get(PolicyPath); code != http.StatusOK || !strings.Contains(body, `"name":"lab"`) || !strings.Contains(body, `"localASN":64512`) {
		t.Errorf("%s: %d %q", PolicyPath, code, body)
	}
	if code, body := get(RoutesPath); code != http.StatusOK || !strings.Contains(body, `"route":"10.10.1.0/24","type":"NodeIPAMPodCIDR","k8sObjRef":"n1"`) {
		t.Errorf("%s: %d %q", RoutesPath, code, body)
	}
}
