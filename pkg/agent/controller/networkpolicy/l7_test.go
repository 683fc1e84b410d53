package networkpolicy

import (
	"bytes"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/l7engine"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

type fakeL7Engine struct {
	rules map[uint16]*l7engine.Rule
	sets  int
}

func (f *fakeL7Engine) SetRules(r map[uint16]*l7engine.Rule) { f.rules, f.sets = r, f.sets+1 }
func (f *fakeL7Engine) SetReport(func(l7engine.Verdict))     {}

// desiredWithL7 is a policy's desired state with rule 0 a layer 7 rule
// (two service buckets) and rule 1 a plain one.
func desiredWithL7() *desiredPolicy {
	p := &cpv1beta2.NetworkPolicy{SourceRef: &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaNetworkPolicy, Namespace: "default", Name: "allow-only-get"}}
	p.Rules = []cpv1beta2.NetworkPolicyRule{
		{Direction: cpv1beta2.DirectionIn, Name: "allow-http", L7Protocols: []cpv1beta2.L7Protocol{{HTTP: &cpv1beta2.HTTPProtocol{Method: "GET", Path: "/api/v2/*"}}}},
		{Direction: cpv1beta2.DirectionIn, Name: "drop-other"},
	}
	return &desiredPolicy{
		rules: map[string]*agentof.PolicyRule{
			"0/a": {Action: agentof.ActionAllow},
			"0/b": {Action: agentof.ActionAllow, Services: []agentof.PolicyPort{{Protocol: binding.IPProtoTCP, Port: 8080}}},
			"1/":  {Action: agentof.ActionDrop},
		},
		orders: map[string]RuleOrder{"0/a": {}, "0/b": {}, "1/": {}},
		infos:  map[string]ruleInfo{"0/a": {name: "allow-http"}, "0/b": {name: "allow-http"}, "1/": {name: "drop-other"}},
		l7:     map[int]*l7engine.Rule{0: l7Rule(p, &p.Rules[0])},
	}
}

func TestLayer7RulesGetAnIdTheEngineKnowsAndKeepTheirPorts(t *testing.T) {
	engine := &fakeL7Engine{}
	l := newL7Rules(engine)
	want := desiredWithL7()
	l.apply("p1", want)
	a, b := want.rules["0/a"], want.rules["0/b"]
	if a.L7VLAN == 0 || a.L7VLAN != b.L7VLAN {
		t.Fatalf("the buckets of one layer 7 rule got ids %d and %d, want one id", a.L7VLAN, b.L7VLAN)
	}
	if want.rules["1/"].L7VLAN != 0 {
		t.Error("a plain rule got a layer 7 id")
	}
	if len(a.Services) != 0 {
		t.Errorf("a layer 7 rule without ports matches %+v, want every protocol (what is not TCP is dropped at Output)", a.Services)
	}
	if b.Services[0].Port != 8080 {
		t.Errorf("a layer 7 rule's ports changed: %+v", b.Services)
	}
	r := engine.rules[a.L7VLAN]
	if r == nil || r.Policy != "AntreaNetworkPolicy:default/allow-only-get" || r.Name != "allow-http" || r.Direction != "Ingress" ||
		len(r.HTTP) != 1 || r.HTTP[0].Path != "/api/v2/*" {
		t.Fatalf("the engine has %+v under id %d", r, a.L7VLAN)
	}
	// Another policy's rule gets another id; the first keeps its own.
	other := desiredWithL7()
	l.apply("p2", other)
	again := desiredWithL7()
	sets := engine.sets
	l.apply("p1", again)
	if engine.sets != sets {
		t.Error("the same rules were handed to the engine again")
	}
	if other.rules["0/a"].L7VLAN == a.L7VLAN || again.rules["0/a"].L7VLAN != a.L7VLAN {
		t.Errorf("ids: p1 %d then %d, p2 %d", a.L7VLAN, again.rules["0/a"].L7VLAN, other.rules["0/a"].L7VLAN)
	}
	// The policy gone, its id leaves the engine.
	l.apply("p1", &desiredPolicy{rules: map[string]*agentof.PolicyRule{}})
	if _, ok := engine.rules[a.L7VLAN]; ok || len(engine.rules) != 1 {
		t.Errorf("after p1 went the engine has %d rules, with p1's: %v", len(engine.rules), ok)
	}
}

func TestLayer7RulesAreLeftOutWithoutAnEngine(t *testing.T) {
	var l *l7Rules
	want := desiredWithL7()
	l.apply("p1", want)
	if len(want.rules) != 1 || want.rules["1/"] == nil || len(want.orders) != 1 || len(want.infos) != 1 {
		t.Errorf("without an engine the desired state holds %d rules, %d orders, %d infos; want only the plain rule",
			len(want.rules), len(want.orders), len(want.infos))
	}
}

func TestEngineVerdictsAreAuditLinesNamingPolicyRuleAndRequest(t *testing.T) {
	rule := &l7engine.Rule{Policy: "AntreaNetworkPolicy:default/ingress-allow-http-request-to-api-v2", Name: "allow-http", Direction: "Ingress"}
	for _, tc := range []struct {
		v    l7engine.Verdict
		want string
	}{
		{l7engine.Verdict{Rule: rule, Client: netip.MustParseAddrPort("10.10.1.4:45034"), Server: netip.MustParseAddrPort("10.10.1.3:80"),
			Protocol: "http", HTTP: &l7engine.HTTPRequest{Method: "POST", Host: "foo.bar.com", Path: "/admin"}},
			"L7Engine AntreaNetworkPolicy:default/ingress-allow-http-request-to-api-v2 allow-http Ingress Reject <nil> <nil> 10.10.1.4 45034 10.10.1.3 80 TCP <nil> <nil> http POST foo.bar.com /admin"},
		{l7engine.Verdict{Rule: rule, Allowed: true, Client: netip.MustParseAddrPort("10.10.1.4:1"), Server: netip.MustParseAddrPort("10.10.1.3:443"),
			Protocol: "tls", SNI: "foo.bar.com"},
			"L7Engine AntreaNetworkPolicy:default/ingress-allow-http-request-to-api-v2 allow-http Ingress Allow <nil> <nil> 10.10.1.4 1 10.10.1.3 443 TCP <nil> <nil> tls foo.bar.com"},
	} {
		buf := &lockedBuffer{}
		l7Report(newAuditLoggerTo(buf, time.Millisecond))(tc.v)
		// A Reject line is written when its dedup window ends.
		deadline := time.Now().Add(5 * time.Second)
		for buf.String() == "" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		got := strings.TrimSpace(buf.String())
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("line %q\nwant it to end with %q", got, tc.want)
		}
	}
}

// lockedBuffer is a bytes.Buffer the audit logger's timer may write while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Traceflow names the layer 7 rule of a layer 7 id, the one the engine
// holds under that id; an unknown id, or no engine, names nothing.
func TestTraceflowNamesTheLayer7RuleOfAnId(t *testing.T) {
	c := &Controller{l7: newL7Rules(&fakeL7Engine{})}
	want := desiredWithL7()
	c.l7.apply("p1", want)
	id := want.rules["0/a"].L7VLAN
	if policy, rule, ok := c.TraceflowL7Rule(id); !ok || policy != "AntreaNetworkPolicy:default/allow-only-get" || rule != "allow-http" {
		t.Errorf("id %d names %q %q %v", id, policy, rule, ok)
	}
	if _, _, ok := c.TraceflowL7Rule(id + 1); ok {
		t.Error("an id no rule has is named")
	}
	if _, _, ok := (&Controller{}).TraceflowL7Rule(id); ok {
		t.Error("without an engine an id is named")
	}
}
