package v1beta2_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned/scheme"
)

// Fuzz targets of the controlplane wire (issue 17 item 8): what the agent's
// clientset decodes from the controller. Run one with:
//
//	nice -n 10 go test -run '^$' -fuzz FuzzWatchStream -fuzztime 60s ./pkg/apis/controlplane/v1beta2
//
// Crashers land in testdata/fuzz/<target> and run in every `go test`.

// agentNegotiator is the content negotiation of the agent's generated
// clientset (pkg/client/.../controlplane_client.go setConfigDefaults): JSON,
// the only encoding the controlplane types have.
func agentNegotiator() runtime.ClientNegotiator {
	ns := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	return runtime.NewClientNegotiator(ns, v1beta2.SchemeGroupVersion)
}

// bothScheme holds the internal and the v1beta2 types with their
// conversions, as the controller's API server has them.
func bothScheme(tb testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{controlplane.AddToScheme, v1beta2.AddToScheme} {
		if err := add(s); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// seedObjects are valid objects of every kind the agent watches or gets.
func seedObjects() []runtime.Object {
	tcp, allow, drop := v1beta2.ProtocolTCP, v1beta2.RuleActionAllow, v1beta2.RuleActionDrop
	port := intstr.FromInt32(80)
	named := intstr.FromString("http")
	members := []v1beta2.GroupMember{
		{Pod: &v1beta2.PodReference{Namespace: "ns", Name: "web-0"}, IPs: []v1beta2.IPAddress{{10, 9, 0, 5}}, Ports: []v1beta2.NamedPort{{Port: 8080, Name: "http", Protocol: tcp}}},
		{Node: &v1beta2.NodeReference{Name: "n1"}, IPs: []v1beta2.IPAddress{{0xfd, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}}},
	}
	meta := metav1.ObjectMeta{Name: "g1", UID: types.UID("3f1c"), ResourceVersion: "12", Generation: 2}
	return []runtime.Object{
		&v1beta2.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "uid-1", Generation: 3},
			Rules: []v1beta2.NetworkPolicyRule{
				{Direction: v1beta2.DirectionIn, From: v1beta2.NetworkPolicyPeer{AddressGroups: []string{"g1"}, IPBlocks: []v1beta2.IPBlock{
					{CIDR: v1beta2.IPNet{IP: v1beta2.IPAddress{10, 0, 0, 0}, PrefixLength: 8}, Except: []v1beta2.IPNet{{IP: v1beta2.IPAddress{10, 1, 0, 0}, PrefixLength: 16}}},
				}}, Services: []v1beta2.Service{{Protocol: &tcp, Port: &port, EndPort: ptr(int32(90))}, {Port: &named}}, Action: &allow, Name: "r1", LogLabel: "l"},
				{Direction: v1beta2.DirectionOut, To: v1beta2.NetworkPolicyPeer{ToServices: []v1beta2.ServiceReference{{Namespace: "ns", Name: "svc"}}},
					Priority: 1, Action: &drop, EnableLogging: true, AppliedToGroups: []string{"a2"}},
			},
			AppliedToGroups: []string{"a1"},
			Priority:        ptr(1.5),
			TierPriority:    ptr(int32(250)),
			SourceRef:       &v1beta2.NetworkPolicyReference{Type: v1beta2.AntreaClusterNetworkPolicy, Name: "acnp", UID: "u"},
		},
		&v1beta2.AddressGroup{ObjectMeta: meta, GroupMembers: members},
		&v1beta2.AppliedToGroup{ObjectMeta: meta, GroupMembers: members},
		&v1beta2.AddressGroupPatch{ObjectMeta: meta, AddedGroupMembers: members[:1], RemovedGroupMembers: members[1:]},
		&v1beta2.AppliedToGroupPatch{ObjectMeta: meta, AddedGroupMembers: members[1:], RemovedGroupMembers: members[:1]},
		&v1beta2.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: "uid-1"}, Nodes: []v1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 3}}},
		&v1beta2.AddressGroupList{Items: []v1beta2.AddressGroup{{ObjectMeta: meta, GroupMembers: members}}},
	}
}

func encode(tb testing.TB, obj runtime.Object) []byte {
	tb.Helper()
	enc := scheme.Codecs.LegacyCodec(v1beta2.SchemeGroupVersion)
	var b bytes.Buffer
	if err := enc.Encode(obj, &b); err != nil {
		tb.Fatalf("encode %T: %v", obj, err)
	}
	return b.Bytes()
}

// watchEvent is one event of a watch response body as the API server
// writes it (metav1.WatchEvent, one JSON document per line).
func watchEvent(tb testing.TB, typ watch.EventType, obj runtime.Object) []byte {
	tb.Helper()
	b := encode(tb, &metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: bytes.TrimSpace(encode(tb, obj))}})
	return b
}

// checkObject holds the properties of one decoded object: its JSON encoding
// decodes to an equal object, and converting it to the internal types and
// back gives it again.
func checkObject(t *testing.T, s *runtime.Scheme, dec runtime.Decoder, obj runtime.Object) {
	t.Helper()
	wire := encode(t, obj)
	again, _, err := dec.Decode(wire, nil, nil)
	if err != nil {
		t.Fatalf("%T encoded as %s does not decode: %v", obj, wire, err)
	}
	if !apiequality.Semantic.DeepEqual(normalized(obj), normalized(again)) {
		t.Fatalf("%T changed on the wire:\n%#v\nbecame\n%#v\n(%s)", obj, obj, again, wire)
	}
	internal, err := s.ConvertToVersion(obj.DeepCopyObject(), controlplane.SchemeGroupVersion)
	if err != nil {
		t.Fatalf("%T does not convert to the internal version: %v", obj, err)
	}
	back, err := s.ConvertToVersion(internal, v1beta2.SchemeGroupVersion)
	if err != nil {
		t.Fatalf("internal %T does not convert back: %v", internal, err)
	}
	if !apiequality.Semantic.DeepEqual(normalized(obj), normalized(back)) {
		t.Fatalf("%T changed through the internal version:\n%#v\nbecame\n%#v", obj, obj, back)
	}
}

// normalized drops what JSON itself does not keep: the sub-second part of
// metav1.Time (RFC 3339 in seconds) and TypeMeta, which the decoder fills
// from the scheme.
func normalized(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(v1beta2.SchemeGroupVersion.WithKind(""))
	if m, err := metaAccessor(obj); err == nil {
		if ts := m.GetCreationTimestamp(); !ts.IsZero() {
			m.SetCreationTimestamp(metav1.NewTime(ts.Rfc3339Copy().Time))
		}
		if ts := m.GetDeletionTimestamp(); ts != nil {
			m.SetDeletionTimestamp(ptr(metav1.NewTime(ts.Rfc3339Copy().Time)))
		}
		fields := m.GetManagedFields()
		for i := range fields {
			if fields[i].Time != nil {
				fields[i].Time = ptr(metav1.NewTime(fields[i].Time.Rfc3339Copy().Time))
			}
		}
		m.SetManagedFields(fields)
	}
	return obj
}

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("no ObjectMeta")
	}
	return m, nil
}

// FuzzWatchStream feeds a watch response body through the decoder the
// agent's watch uses (client-go's stream watcher: JSON framing,
// metav1.WatchEvent, then the object by the clientset's scheme). Every
// decoded event carries an object of a controlplane kind (or a Status for
// ERROR) that passes checkObject; undecodable input ends the stream with an
// error and nothing else.
func FuzzWatchStream(f *testing.F) {
	for _, obj := range seedObjects() {
		f.Add(watchEvent(f, watch.Added, obj))
	}
	np := seedObjects()[0]
	f.Add(append(append(watchEvent(f, watch.Added, np), watchEvent(f, watch.Modified, np)...), watchEvent(f, watch.Deleted, np)...))
	f.Add(watchEvent(f, watch.Bookmark, &v1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99"}}))
	f.Add(watchEvent(f, watch.Error, &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","rules":[{"direction":"In","services":[{"port":"x"},{"port":-1}]}]}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","groupMembers":[{"ips":["!!"]}]}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1"}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","priority":1e400}}`))
	f.Add([]byte(`{"type":"ADDED","object":null}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"ListOptions","apiVersion":"controlplane.antrea.io/v1beta2"}}`))
	f.Add([]byte(`{"type":"ADDED"`))
	f.Add([]byte("\x00\xff"))
	s := bothScheme(f)
	neg := agentNegotiator()
	objDec, streamSer, framer, err := neg.StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		f.Fatal(err)
	}
	bodyDec, err := neg.Decoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(body))), streamSer), objDec)
		defer d.Close()
		for i := 0; i < 64; i++ {
			typ, obj, err := d.Decode()
			if err != nil {
				return
			}
			switch typ {
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
			default:
				t.Fatalf("event of type %q", typ)
			}
			switch obj.(type) {
			case *metav1.Status:
				continue
			case *v1beta2.NetworkPolicy, *v1beta2.AddressGroup, *v1beta2.AppliedToGroup, *v1beta2.AddressGroupPatch, *v1beta2.AppliedToGroupPatch,
				*v1beta2.NetworkPolicyStatus, *v1beta2.NetworkPolicyList, *v1beta2.AddressGroupList, *v1beta2.AppliedToGroupList:
			default:
				// Other kinds the clientset's scheme knows (meta/v1
				// options under this group version) are the agent's
				// watcher's to refuse: it type-checks every event.
				continue
			}
			checkObject(t, s, bodyDec, obj)
		}
	})
}

// FuzzDecodeInto feeds a GET or LIST response body to the decoder the
// typed client uses (Result.Into: the kind comes from the target when the
// body has none), for each controlplane kind, and checks the result as
// FuzzWatchStream does.
func FuzzDecodeInto(f *testing.F) {
	for i, obj := range seedObjects() {
		f.Add(uint8(i), encode(f, obj))
	}
	f.Add(uint8(0), []byte(`{"rules":[{"direction":"Out","to":{"ipBlocks":[{"cidr":{"ip":"CgAAAA==","prefixLength":33}}]}}]}`))
	f.Add(uint8(1), []byte(`{"groupMembers":[{"pod":{},"ports":[{"port":70000}]}]}`))
	f.Add(uint8(0), []byte(`{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2"}`))
	f.Add(uint8(3), []byte(`{"metadata":{"creationTimestamp":"2026-12-02T06:00:00.5Z"}}`))
	f.Add(uint8(0), []byte(`[]`))
	s := bothScheme(f)
	dec, err := agentNegotiator().Decoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		f.Fatal(err)
	}
	kinds := func() []runtime.Object {
		return []runtime.Object{
			&v1beta2.NetworkPolicy{}, &v1beta2.AddressGroup{}, &v1beta2.AppliedToGroup{}, &v1beta2.AddressGroupPatch{},
			&v1beta2.AppliedToGroupPatch{}, &v1beta2.NetworkPolicyStatus{}, &v1beta2.AddressGroupList{},
			&v1beta2.NetworkPolicyList{}, &v1beta2.AppliedToGroupList{},
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		all := kinds()
		into := all[int(kind)%len(all)]
		obj, _, err := dec.Decode(body, nil, into)
		if err != nil {
			return
		}
		checkObject(t, s, dec, obj)
	})
}

// FuzzServerToAgent builds internal objects from fuzzed values, sends them
// the way the controller's API server does (converted to v1beta2, encoded
// as JSON, inside a watch event) and decodes them as the agent does: the
// agent must see what the controller computed, field for field, and the
// conversion back to the internal version must give the original.
func FuzzServerToAgent(f *testing.F) {
	f.Add("uid-1", "g1", "r1", []byte{10, 0, 0, 0}, int32(8), int32(80), "http", int32(90), 1.5, int32(250), uint8(0), "ns", "web-0")
	f.Add("", "", "", []byte{}, int32(-1), int32(0), "", int32(0), math.Copysign(0, -1), int32(0), uint8(0xff), "", "")
	f.Add("uid-2", "g-\u00e9", "r\"\\", []byte{0xfd, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, int32(128), int32(-65536), "0", int32(1<<31-1), 1e308, int32(-1), uint8(7), "kube-system", "a.b")
	s := bothScheme(f)
	neg := agentNegotiator()
	objDec, streamSer, framer, err := neg.StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, group, rule string, ip []byte, prefix, port int32, portName string, endPort int32,
		priority float64, tier int32, flags uint8, ns, pod string) {
		if math.IsNaN(priority) || math.IsInf(priority, 0) {
			t.Skip() // not a policy priority (the ACNP's spec.priority is validated finite)
		}
		for _, str := range []string{name, group, rule, portName, ns, pod} {
			if !utf8.ValidString(str) {
				t.Skip() // names come from Kubernetes objects, which are UTF-8
			}
		}
		proto, action := controlplane.ProtocolTCP, controlplane.RuleActionDrop
		if flags&1 != 0 {
			proto, action = controlplane.ProtocolUDP, controlplane.RuleActionPass
		}
		svcPort := intstr.FromInt32(port)
		if flags&2 != 0 {
			svcPort = intstr.FromString(portName)
		}
		dir := controlplane.DirectionIn
		if flags&4 != 0 {
			dir = controlplane.DirectionOut
		}
		peer := controlplane.NetworkPolicyPeer{
			AddressGroups: []string{group},
			IPBlocks:      []controlplane.IPBlock{{CIDR: controlplane.IPNet{IP: ip, PrefixLength: prefix}, Except: []controlplane.IPNet{{IP: ip, PrefixLength: prefix + 1}}}},
		}
		np := &controlplane.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Generation: int64(tier)},
			Rules: []controlplane.NetworkPolicyRule{{
				Direction: dir, From: peer, To: peer, Priority: port, Action: &action, EnableLogging: flags&8 != 0,
				Services: []controlplane.Service{{Protocol: &proto, Port: &svcPort, EndPort: &endPort}},
				Name:     rule, LogLabel: portName, AppliedToGroups: []string{group},
			}},
			AppliedToGroups:  []string{group},
			Priority:         &priority,
			TierPriority:     &tier,
			SourceRef:        &controlplane.NetworkPolicyReference{Type: controlplane.AntreaNetworkPolicy, Namespace: ns, Name: pod},
			AppliedToPerRule: flags&16 != 0,
		}
		member := controlplane.GroupMember{
			Pod: &controlplane.PodReference{Namespace: ns, Name: pod}, IPs: []controlplane.IPAddress{ip},
			Ports: []controlplane.NamedPort{{Port: port, Name: portName, Protocol: proto}},
		}
		if flags&32 != 0 {
			member = controlplane.GroupMember{Node: &controlplane.NodeReference{Name: pod}, IPs: []controlplane.IPAddress{ip}}
		}
		meta := metav1.ObjectMeta{Name: group, ResourceVersion: rule}
		for _, internal := range []runtime.Object{
			np,
			&controlplane.AddressGroup{ObjectMeta: meta, GroupMembers: []controlplane.GroupMember{member}},
			&controlplane.AppliedToGroup{ObjectMeta: meta, GroupMembers: []controlplane.GroupMember{member}},
			&controlplane.AddressGroupPatch{ObjectMeta: meta, AddedGroupMembers: []controlplane.GroupMember{member}},
			&controlplane.AppliedToGroupPatch{ObjectMeta: meta, RemovedGroupMembers: []controlplane.GroupMember{member}},
		} {
			sent, err := s.ConvertToVersion(internal.DeepCopyObject(), v1beta2.SchemeGroupVersion)
			if err != nil {
				t.Fatalf("internal %T does not convert to v1beta2: %v", internal, err)
			}
			body := watchEvent(t, watch.Modified, sent)
			d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(body))), streamSer), objDec)
			typ, got, err := d.Decode()
			d.Close()
			if err != nil || typ != watch.Modified {
				t.Fatalf("the agent cannot decode %T sent as %s: %v %v", sent, body, typ, err)
			}
			if !apiequality.Semantic.DeepEqual(normalized(sent), normalized(got)) {
				t.Fatalf("the agent got\n%#v\nthe controller sent\n%#v\n(%s)", got, sent, body)
			}
			back, err := s.ConvertToVersion(got, controlplane.SchemeGroupVersion)
			if err != nil {
				t.Fatalf("%T does not convert back: %v", got, err)
			}
			internal.GetObjectKind().SetGroupVersionKind(back.GetObjectKind().GroupVersionKind())
			if !apiequality.Semantic.DeepEqual(internal, back) {
				t.Fatalf("round trip through the wire changed\n%#v\ninto\n%#v", internal, back)
			}
		}
	})
}
