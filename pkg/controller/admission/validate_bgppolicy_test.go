package admission

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// Every BGPPolicy of docs/bgp-policy.md (upstream's examples) decodes
// strictly and is accepted.
func TestUpstreamBGPPolicyExamplesAreAccepted(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../docs/bgp-policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(newFakeLookup(), controllerUser)
	n := 0
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if !strings.Contains(block, "kind: BGPPolicy") {
			continue
		}
		n++
		var p crdv1alpha1.BGPPolicy
		if err := yaml.UnmarshalStrict([]byte(block), &p); err != nil {
			t.Errorf("an example does not decode strictly: %v\n%s", err, block)
			continue
		}
		if errs := v.ValidateBGPPolicy(context.Background(), &p); len(errs) != 0 {
			t.Errorf("example %s refused: %v", p.Name, errs)
		}
	}
	if n < 3 {
		t.Errorf("docs/bgp-policy.md has %d BGPPolicy examples, want upstream's (at least 3)", n)
	}
}

func TestInvalidBGPPoliciesAreRefusedNamingTheField(t *testing.T) {
	v := NewValidator(newFakeLookup(), controllerUser)
	valid := func() *crdv1alpha1.BGPPolicy {
		return &crdv1alpha1.BGPPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: crdv1alpha1.BGPPolicySpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"bgp": "enabled"}},
			LocalASN:     64512, ListenPort: ptr.To[int32](179),
			Advertisements: crdv1alpha1.Advertisements{Service: &crdv1alpha1.ServiceAdvertisement{
				IPTypes: []crdv1alpha1.ServiceIPType{crdv1alpha1.ServiceIPTypeClusterIP}}},
			BGPPeers: []crdv1alpha1.BGPPeer{{Address: "192.168.77.200", ASN: 65001, Port: ptr.To[int32](179)},
				{Address: "2001:db8::1", ASN: 65001}},
		}}
	}
	if errs := v.ValidateBGPPolicy(context.Background(), valid()); len(errs) != 0 {
		t.Fatalf("the valid policy is refused: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*crdv1alpha1.BGPPolicy)
		field  string
	}{
		{"a local ASN of 0", func(p *crdv1alpha1.BGPPolicy) { p.Spec.LocalASN = 0 }, "spec.localASN"},
		{"a local ASN above 16 bits", func(p *crdv1alpha1.BGPPolicy) { p.Spec.LocalASN = 65536 }, "spec.localASN"},
		{"listen port 0", func(p *crdv1alpha1.BGPPolicy) { p.Spec.ListenPort = ptr.To[int32](0) }, "spec.listenPort"},
		{"listen port above 65535", func(p *crdv1alpha1.BGPPolicy) { p.Spec.ListenPort = ptr.To[int32](70000) }, "spec.listenPort"},
		{"a node selector that does not parse", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "bgp", Operator: "Sometimes"}}
		}, "spec.nodeSelector"},
		{"a confederation identifier out of range", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.Confederation = &crdv1alpha1.Confederation{Identifier: 0}
		}, "spec.confederation.identifier"},
		{"a confederation member out of range", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.Confederation = &crdv1alpha1.Confederation{Identifier: 65000, MemberASNs: []int32{64513, 100000}}
		}, "spec.confederation.memberASNs[1]"},
		{"an unknown Service IP type", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.Advertisements.Service.IPTypes = append(p.Spec.Advertisements.Service.IPTypes, "NodePort")
		}, "spec.advertisements.service.ipTypes[1]"},
		{"a Service IP type twice", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.Advertisements.Service.IPTypes = append(p.Spec.Advertisements.Service.IPTypes, crdv1alpha1.ServiceIPTypeClusterIP)
		}, "spec.advertisements.service.ipTypes[1]"},
		{"a peer address that is a name", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[1].Address = "router.example" }, "spec.bgpPeers[1].address"},
		{"a peer address with a prefix length", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].Address = "192.168.77.200/24" }, "spec.bgpPeers[0].address"},
		{"an unspecified peer address", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].Address = "0.0.0.0" }, "spec.bgpPeers[0].address"},
		{"two peers with one address", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.BGPPeers[1] = crdv1alpha1.BGPPeer{Address: "192.168.77.200", ASN: 65002, Port: ptr.To[int32](1179)}
		}, "spec.bgpPeers[1].address"},
		{"a peer ASN of 0", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].ASN = 0 }, "spec.bgpPeers[0].asn"},
		{"a peer port of 0", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].Port = ptr.To[int32](0) }, "spec.bgpPeers[0].port"},
		{"a multihop TTL above 255", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].MultihopTTL = ptr.To[int32](256) }, "spec.bgpPeers[0].multihopTTL"},
		{"a graceful restart time above an hour", func(p *crdv1alpha1.BGPPolicy) {
			p.Spec.BGPPeers[0].GracefulRestartTimeSeconds = ptr.To[int32](3601)
		}, "spec.bgpPeers[0].gracefulRestartTimeSeconds"},
		{"a hold time of 2 s", func(p *crdv1alpha1.BGPPolicy) { p.Spec.BGPPeers[0].HoldTimeSeconds = ptr.To[int32](2) }, "spec.bgpPeers[0].holdTimeSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(p)
			errs := v.ValidateBGPPolicy(context.Background(), p)
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors = %v, want one naming %s", errs, tc.field)
			}
		})
	}
}
