package antctl

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

func agentInfo(node string, pods int32) *crdv1beta1.AntreaAgentInfo {
	return &crdv1beta1.AntreaAgentInfo{ObjectMeta: metav1.ObjectMeta{Name: node}, Version: "v0.1.0",
		PodRef:      corev1.ObjectReference{Namespace: "kube-system", Name: "antrea-agent-" + node},
		NodeRef:     corev1.ObjectReference{Name: node},
		NodeSubnets: []string{"10.10.0.0/24"}, OVSInfo: crdv1beta1.OVSInfo{Version: "3.1.0", BridgeName: "br-int"},
		NetworkPolicyControllerInfo: crdv1beta1.NetworkPolicyControllerInfo{NetworkPolicyNum: 2, AddressGroupNum: 1, AppliedToGroupNum: 3},
		LocalPodNum:                 pods,
		AgentConditions:             []crdv1beta1.AgentCondition{{Type: crdv1beta1.AgentHealthy, Status: corev1.ConditionTrue}}}
}

func TestGetAgentInfoAndControllerInfoPrintTheReports(t *testing.T) {
	antrea := antreafake.NewSimpleClientset(agentInfo("node-2", 4), agentInfo("node-1", 7),
		&crdv1beta1.AntreaControllerInfo{ObjectMeta: metav1.ObjectMeta{Name: "antrea-controller"}, Version: "v0.1.0",
			PodRef:                      corev1.ObjectReference{Namespace: "kube-system", Name: "antrea-controller-x"},
			NodeRef:                     corev1.ObjectReference{Name: "node-1"},
			NetworkPolicyControllerInfo: crdv1beta1.NetworkPolicyControllerInfo{NetworkPolicyNum: 5, AddressGroupNum: 2, AppliedToGroupNum: 4},
			ConnectedAgentNum:           2,
			ControllerConditions:        []crdv1beta1.ControllerCondition{{Type: crdv1beta1.ControllerHealthy, Status: corev1.ConditionTrue}}})
	cl := &Clients{Kube: kubefake.NewClientset(), Antrea: antrea}
	r := runAntctlWith(t, cl, "get", "agentinfo")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	want := [][]string{
		{"NODE", "POD", "VERSION", "HEALTHY", "SUBNETS", "OVS", "NETWORK-POLICIES", "ADDRESS-GROUPS", "APPLIED-TO-GROUPS", "LOCAL-PODS"},
		{"node-1", "kube-system/antrea-agent-node-1", "v0.1.0", "True", "10.10.0.0/24", "3.1.0", "2", "1", "3", "7"},
		{"node-2", "kube-system/antrea-agent-node-2", "v0.1.0", "True", "10.10.0.0/24", "3.1.0", "2", "1", "3", "4"},
	}
	if got := rows(r.out); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("get agentinfo printed\n%s\nwant %q", r.out, want)
	}
	r = runAntctlWith(t, cl, "get", "ai", "--node", "node-2", "-o", "json")
	var one crdv1beta1.AntreaAgentInfo
	if err := json.Unmarshal([]byte(r.out), &one); r.runErr != nil || err != nil || one.Name != "node-2" || one.LocalPodNum != 4 || one.Kind != "AntreaAgentInfo" {
		t.Errorf("--node node-2 -o json: %v %v\n%s", r.runErr, err, r.out)
	}
	r = runAntctlWith(t, cl, "get", "agentinfo", "--node", "node-3")
	if r.runErr == nil || r.runErr.Error() != `no AntreaAgentInfo of node "node-3": its agent has not reported (did you mean "node-1"?)` {
		t.Errorf("--node node-3: %v", r.runErr)
	}
	r = runAntctlWith(t, cl, "get", "controllerinfo")
	wantCtl := [][]string{
		{"POD", "NODE", "VERSION", "HEALTHY", "NETWORK-POLICIES", "ADDRESS-GROUPS", "APPLIED-TO-GROUPS", "CONNECTED-AGENTS"},
		{"kube-system/antrea-controller-x", "node-1", "v0.1.0", "True", "5", "2", "4", "2"},
	}
	if got := rows(r.out); r.runErr != nil || !slices.EqualFunc(got, wantCtl, slices.Equal) {
		t.Errorf("get controllerinfo printed (%v)\n%s\nwant %q", r.runErr, r.out, wantCtl)
	}
	r = runAntctlWith(t, &Clients{Kube: kubefake.NewClientset(), Antrea: antreafake.NewSimpleClientset()}, "get", "ci")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), "antrea-controller has not reported") {
		t.Errorf("no AntreaControllerInfo: %v", r.runErr)
	}
}
