package antctl

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

func TestEgressTableShowsTheIPItsPoolItsNodeAndTheAllocation(t *testing.T) {
	egresses := []crdv1beta1.Egress{
		{ObjectMeta: metav1.ObjectMeta{Name: "egress-prod-web"},
			Spec: crdv1beta1.EgressSpec{EgressIP: "10.10.0.11", ExternalIPPool: "external-ip-pool"},
			Status: crdv1beta1.EgressStatus{EgressNode: "node-4", Conditions: []crdv1beta1.EgressCondition{
				{Type: crdv1beta1.IPAllocated, Status: corev1.ConditionTrue, Reason: "Allocated"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "egress-late"}, Spec: crdv1beta1.EgressSpec{ExternalIPPool: "external-ip-pool"},
			Status: crdv1beta1.EgressStatus{Conditions: []crdv1beta1.EgressCondition{
				{Type: crdv1beta1.IPAllocated, Status: corev1.ConditionFalse, Reason: "PoolExhausted"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "egress-static"}, Spec: crdv1beta1.EgressSpec{EgressIP: "10.10.0.104"}},
	}
	var out bytes.Buffer
	if err := writeEgressTable(&out, egresses); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"NAME", "EGRESSIP", "EXTERNALIPPOOL", "NODE", "IP-ALLOCATED"},
		{"egress-prod-web", "10.10.0.11", "external-ip-pool", "node-4", "True"},
		{"egress-late", "<none>", "external-ip-pool", "<none>", "False", "(PoolExhausted)"},
		{"egress-static", "10.10.0.104", "<none>", "<none>", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
}

func TestExternalIPPoolTableShowsRangesAndUsage(t *testing.T) {
	pools := []crdv1beta1.ExternalIPPool{{ObjectMeta: metav1.ObjectMeta{Name: "prod-external-ip-pool"},
		Spec:   crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{Start: "10.10.0.2", End: "10.10.0.10"}, {CIDR: "10.10.1.0/28"}}},
		Status: crdv1beta1.ExternalIPPoolStatus{Usage: crdv1beta1.IPPoolUsage{Total: 23, Used: 2}}}}
	var out bytes.Buffer
	if err := writeExternalIPPoolTable(&out, pools); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "prod-external-ip-pool 10.10.0.2-10.10.0.10,10.10.1.0/28 23 2" {
		t.Errorf("table:\n%s", out.String())
	}
}
