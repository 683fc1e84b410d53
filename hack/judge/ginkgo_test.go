package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The two specs that upstream calls a security hole when they fail, for
// plugins without SCTP too; they probe TCP only (k8s v1.37.2
// test/e2e/network/netpol/network_policy.go).
var tcpSpecsNamedSCTP = []string{
	"[sig-network] Netpol NetworkPolicy between server and client should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP [Feature:NetworkPolicy]",
	"[sig-network] Netpol NetworkPolicy between server and client should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP [Feature:NetworkPolicy]",
}

// Specs that open SCTP sockets, tagged so upstream.
var sctpSocketSpecs = []string{
	"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
	"[sig-network] Networking Granular Checks: Services should function for pod-Service: sctp [Feature:SCTPConnectivity]",
	"[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: sctp [LinuxOnly] [Feature:SCTPConnectivity]",
}

// scriptDefault reads a shell default ${VAR:-'...'} from a script of hack/.
func scriptDefault(t *testing.T, script, variable string) string {
	t.Helper()
	src, err := os.ReadFile("../" + script)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(variable) + `:-'([^']*)'`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("hack/%s has no default for %s", script, variable)
	}
	return string(m[1])
}

func TestTheDefaultSkipRunsTheTCPSpecsNamedSCTPAndSkipsOnlySCTPSockets(t *testing.T) {
	skip := regexp.MustCompile(scriptDefault(t, "e2e-upstream.sh", "E2E_SKIP"))
	focus := regexp.MustCompile(scriptDefault(t, "e2e-upstream.sh", "E2E_FOCUS"))
	for _, name := range tcpSpecsNamedSCTP {
		if skip.MatchString(name) {
			t.Errorf("E2E_SKIP %q skips %q, which probes TCP only", skip, name)
		}
		if !focus.MatchString(name) {
			t.Errorf("E2E_FOCUS %q does not select %q", focus, name)
		}
	}
	for _, name := range sctpSocketSpecs {
		if !skip.MatchString(name) {
			t.Errorf("E2E_SKIP %q runs %q, which opens SCTP sockets (this kernel has none)", skip, name)
		}
	}
	// make test's NetworkPolicy subset runs them too: they are cheap (two pods).
	testFocus := regexp.MustCompile(regexp.MustCompile(`E2E_FOCUS='([^']*)'`).FindStringSubmatch(readFile(t, "../test.sh"))[1])
	for _, name := range tcpSpecsNamedSCTP {
		if !testFocus.MatchString(name) || skip.MatchString(name) {
			t.Errorf("make test's subset does not run %q", name)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadReport reads the saved report and lets a case change it.
func loadReport(t *testing.T, change func(specs []ginkgoSpec, suite *ginkgoSuite)) []ginkgoSuite {
	t.Helper()
	var suites []ginkgoSuite
	if err := json.Unmarshal([]byte(readFile(t, "testdata/e2e-report.json")), &suites); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(suites[0].SpecReports, &suites[0])
	}
	return suites
}

func defaultRules(t *testing.T) e2eRules {
	return e2eRules{
		Focus:      regexp.MustCompile(scriptDefault(t, "e2e-upstream.sh", "E2E_FOCUS")),
		Skip:       regexp.MustCompile(scriptDefault(t, "e2e-upstream.sh", "E2E_SKIP")),
		SCTP:       regexp.MustCompile(`\[Feature:SCTPConnectivity\]`),
		SCTPReason: "this kernel has no SCTP",
		Strict:     regexp.MustCompile(`Netpol|NetworkPolicy`),
	}
}

// find returns the spec whose leaf text contains s.
func find(t *testing.T, specs []ginkgoSpec, s string) *ginkgoSpec {
	t.Helper()
	for i := range specs {
		if specs[i].LeafNodeType == "It" && strings.Contains(specs[i].name(), s) {
			return &specs[i]
		}
	}
	t.Fatalf("no spec %q in the saved report", s)
	return nil
}

func TestE2EVerdict(t *testing.T) {
	failure := func(sp *ginkgoSpec, msg string) {
		sp.Failure = &struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}{Message: msg}
	}
	cases := []struct {
		name   string
		change func(specs []ginkgoSpec, suite *ginkgoSuite)
		wantOK bool
		// want is a piece of the verdict's text.
		want string
	}{
		{name: "the saved run passes, its flaky Services spec listed as flaky", wantOK: true, want: "1 flaky"},
		{name: "a NetworkPolicy spec that passed only at its second attempt fails the run",
			change: func(specs []ginkgoSpec, _ *ginkgoSuite) {
				find(t, specs, "should enforce updated policy").NumAttempts = 2
			}, want: "1 NetworkPolicy spec(s) passed only on a retry"},
		{name: "a TCP spec named for SCTP that failed fails the run",
			change: func(specs []ginkgoSpec, suite *ginkgoSuite) {
				sp := find(t, specs, "mistakenly treat 'protocol: SCTP'")
				sp.State = "failed"
				failure(sp, "Had 1 wrong reachability entries")
				suite.SuiteSucceeded = false
			}, want: "1 spec(s) failed"},
		{name: "a timed-out spec fails the run",
			change: func(specs []ginkgoSpec, suite *ginkgoSuite) {
				find(t, specs, "DNS for services").State = "timedout"
				suite.SuiteSucceeded = false
			}, want: "1 spec(s) failed"},
		{name: "a failed spec outside the focus is not dropped",
			change: func(specs []ginkgoSpec, suite *ginkgoSuite) {
				sp := find(t, specs, "DNS for services")
				sp.ContainerHierarchyTexts = []string{"[sig-apps] Deployment"}
				sp.State = "failed"
				suite.SuiteSucceeded = false
			}, want: "1 spec(s) failed"},
		{name: "a suite that failed outside every spec fails the run",
			change: func(specs []ginkgoSpec, suite *ginkgoSuite) {
				suite.SuiteSucceeded = false
			}, want: "failed without a failed spec"},
		{name: "a failed SynchronizedBeforeSuite fails the run",
			change: func(specs []ginkgoSpec, suite *ginkgoSuite) {
				specs[0].State = "failed"
				suite.SuiteSucceeded = false
			}, want: "SynchronizedBeforeSuite node"},
		{name: "a run where no selected spec ran fails",
			change: func(specs []ginkgoSpec, _ *ginkgoSuite) {
				for i := range specs {
					if specs[i].LeafNodeType == "It" {
						specs[i].State = "skipped"
					}
				}
			}, want: "no selected spec ran"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeSpecs(loadReport(t, tc.change), defaultRules(t))
			text := verdictText(v)
			if v.OK != tc.wantOK || !strings.Contains(text, tc.want) {
				t.Fatalf("verdict OK=%t, want %t, with %q in:\n%s", v.OK, tc.wantOK, tc.want, text)
			}
		})
	}
}

func TestE2EListNamesWhySpecsWereSkipped(t *testing.T) {
	v := judgeSpecs(loadReport(t, nil), defaultRules(t))
	reasons := map[string]string{}
	for _, r := range v.Results {
		reasons[r.Name] = r.Reason
	}
	for name, want := range map[string]string{
		"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]": "this kernel has no SCTP",
		"[sig-network] Netpol NetworkPolicy API should support creating NetworkPolicy API operations":                                                                                           "not selected by the focus",
		tcpSpecsNamedSCTP[0]: "",
	} {
		got, ok := reasons[name]
		if !ok || got != want {
			t.Errorf("%s: reason %q (listed %t), want %q", name, got, ok, want)
		}
	}
	// Failures come last, so that a log's tail names them.
	last := v.Results[len(v.Results)-1]
	if last.Outcome != specFlaky {
		t.Errorf("the list ends with %s %s, want the flaky spec", last.Outcome, last.Name)
	}
}

// The real report of ginkgo itself (testdata/ginkgomimic): the field names
// and states the judge reads are ginkgo's.
func TestE2EVerdictOnARealGinkgoReport(t *testing.T) {
	var suites []ginkgoSuite
	if err := json.Unmarshal([]byte(readFile(t, "testdata/ginkgo-real-report.json")), &suites); err != nil {
		t.Fatal(err)
	}
	v := judgeSpecs(suites, e2eRules{Focus: regexp.MustCompile(`Netpol`), Skip: regexp.MustCompile(`should pass`),
		SCTP: regexp.MustCompile(`\[Feature:SCTPConnectivity\]`), Strict: regexp.MustCompile(`Netpol|NetworkPolicy`)})
	text := verdictText(v)
	for _, want := range []string{"0 passed, 1 flaky", "1 of them NetworkPolicy", "1 failed, 2 skipped",
		"verdict: FAIL: 1 spec(s) failed; 1 NetworkPolicy spec(s) passed only on a retry (\"[sig-network] Netpol NetworkPolicy between server and client should enforce updated policy [Feature:NetworkPolicy]\"; its failed attempt is in e2e.log)"} {
		if !strings.Contains(text, want) {
			t.Errorf("verdict lacks %q:\n%s", want, text)
		}
	}
	reasons := map[string]string{}
	for _, r := range v.Results {
		reasons[r.Name] = r.Reason
	}
	for name, want := range map[string]string{
		"[sig-network] Netpol NetworkPolicy between server and client should pass":             `skipped by E2E_SKIP "should pass"`,
		"[sig-network] Netpol NetworkPolicy between server and client should skip at run time": "no SCTP here",
		"[sig-network] Netpol NetworkPolicy between server and client should fail":             "Expected (at gk_test.go:21)",
	} {
		if reasons[name] != want {
			t.Errorf("%s: reason %q, want %q", name, reasons[name], want)
		}
	}
}
