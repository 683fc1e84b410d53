package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// The Pipeline page reads the chosen Node's flows with their counters from
// that Node's agent API, with the session's credentials. The agent is
// another process: here an HTTPS server answering /ovsflows as
// pkg/agent/apiserver does (apis.NewFlow of each flow), for the flows the
// agent's own code installs (agentof.SampleFlows), each with its packets.
func TestThePipelineShowsEachTablesPacketsFromTheAgentAPI(t *testing.T) {
	_, flows, _, err := agentof.SampleFlows()
	if err != nil {
		t.Fatal(err)
	}
	var served []apis.Flow
	flowsIn, packetsIn := map[uint8]int{}, map[uint8]uint64{}
	for i, f := range flows {
		pk := uint64(i%7 + 1)
		served = append(served, apis.NewFlow(&openflow.FlowStats{Flow: *f, PacketCount: pk, ByteCount: 60 * pk}))
		flowsIn[f.Table]++
		packetsIn[f.Table] += pk
	}
	deny := false
	var gotAuth string
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if deny {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(metav1.Status{Status: "Failure", Code: 403,
				Message: `forbidden: User "antrea-ui" cannot get path "/ovsflows"`})
			return
		}
		if r.URL.Path != "/ovsflows" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(served)
	}))
	t.Cleanup(agent.Close)
	u, _ := url.Parse(agent.URL)

	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultSecretName}, Data: map[string][]byte{PasswordHashKey: hash}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: u.Hostname()}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: query.AntreaNamespace, Name: query.AntreaConfigMap},
			Data: map[string]string{"antrea-agent.conf": "apiPort: " + u.Port() + "\n"}})
	antrea := antreafake.NewSimpleClientset(&crdv1beta1.AntreaAgentInfo{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		NodeRef: corev1.ObjectReference{Name: "node-1"}})
	s := New(Config{Clients: &query.Clients{Kube: kube, Antrea: antrea}, SessionTTL: time.Hour,
		RESTConfig: &rest.Config{Host: "https://kube-apiserver.invalid", BearerToken: "the-ui-token"}})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := loggedIn(t, hs)

	var v PipelineView
	c.get("/api/v1/pipeline?node=node-1", &v)
	if !v.Live {
		t.Fatalf("pipeline not live: %s", v.Note)
	}
	if gotAuth != "Bearer the-ui-token" {
		t.Errorf("the agent API got Authorization %q, want the UI's own token", gotAuth)
	}
	checked := 0
	for table, n := range flowsIn {
		want := fmt.Sprintf(">%d flows · %d pkts</text>", n, packetsIn[table])
		if !strings.Contains(v.SVG, want) {
			t.Errorf("table %d: the picture lacks %q", table, want)
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d tables hold sample flows", checked)
	}

	deny = true
	c.get("/api/v1/pipeline?node=node-1", &v)
	if v.Live || !strings.Contains(v.Note, "403") || !strings.Contains(v.Note, "cannot get path") {
		t.Errorf("an agent API refusing the UI: live %v, note %q; want the flow counts and the refusal said", v.Live, v.Note)
	}
}
