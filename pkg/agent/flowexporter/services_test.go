package flowexporter

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"antrea.io/antrea/pkg/ipfix"
)

func TestServiceIndexNamesThePortAClientDialled(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}},
	})
	f := informers.NewSharedInformerFactory(client, 0)
	idx, err := NewServiceIndex(f.Core().V1().Services().Informer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), f.Core().V1().Services().Informer().HasSynced) {
		t.Fatal("the informer did not sync")
	}
	vip := netip.MustParseAddr("10.96.0.20")
	for _, tc := range []struct {
		port  uint16
		proto uint8
		want  string
	}{{80, 6, "demo/web:http"}, {53, 17, "demo/web:dns"}, {53, 6, ""}, {8080, 6, ""}} {
		if got, _ := idx.ServicePortName(vip, tc.port, tc.proto); got != tc.want {
			t.Errorf("port %d/%d: %q, want %q", tc.port, tc.proto, got, tc.want)
		}
	}

	// A record of a connection DNAT'ed from the ClusterIP to an endpoint.
	c := conn(40000, Counts{}, Counts{})
	c.Orig.Dst = vip
	r := Record{Connection: c}
	enrich(&r, nil, idx, nil, nil)
	vals := r.values(nil, "node-1")
	v4, _ := Templates()
	for i, e := range v4.Fields {
		switch e {
		case ipfix.DestinationServicePortName:
			if vals[i].Str != "demo/web:http" {
				t.Errorf("%s = %q", e, vals[i].Str)
			}
		case ipfix.DestinationClusterIPv4:
			if vals[i].Addr != vip {
				t.Errorf("%s = %v", e, vals[i].Addr)
			}
		case ipfix.DestinationIPv4Address:
			if vals[i].Addr != c.Reply.Src {
				t.Errorf("%s = %v, want the endpoint %v", e, vals[i].Addr, c.Reply.Src)
			}
		}
	}
}
