package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func sigEvents(t *testing.T, scenario string) *eventLog {
	t.Helper()
	f, err := os.Open("testdata/sig/" + scenario + ".json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := readEvents(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The saved runs (testdata/sigmimic) fail as the SIG suites do: sctp-only
// fails at SCTP probes only, in both suites' styles; every other one adds one
// failure that no SCTP exemption may cover.
func TestSIGVerdictExemptsOnlyFailedSCTPProbes(t *testing.T) {
	cases := []struct {
		scenario string
		wantOK   bool
		// want is a piece of the printed verdict.
		want string
	}{
		{"sctp-only", true, "verdict: PASS (every failed assertion is an SCTP probe"},
		{"patch-error", false, "unable to patch the admin network policy"},
		{"tcp-fail", false, "--protocol=tcp"},
		{"exec-udp", false, "FAILED to execute command"},
		{"exec-sctp", false, "FAILED to execute command"},
		{"after-sctp", false, "the pods are not where they should be"},
		{"top-fatal", false, "failed without a testify assertion"},
		{"panic", false, "panic: assignment to entry in nil map"},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			v := judgeSIG(sigEvents(t, tc.scenario))
			var out bytes.Buffer
			printSIG(&out, "v0", v)
			if v.OK != tc.wantOK || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("verdict OK=%t, want %t with %q in:\n%s", v.OK, tc.wantOK, tc.want, out.String())
			}
		})
	}
}

func TestSIGVerdictCountsEachExemptProbe(t *testing.T) {
	v := judgeSIG(sigEvents(t, "sctp-only"))
	// Two v0.1.7-style assertions and one v0.2.0 require.Eventually.
	if v.ExemptProbes != 3 || v.Failed != 1 || v.Exempt != 1 || v.Passed != 2 || v.Skipped != 1 {
		t.Fatalf("got %d exempt probes, %d failed tests (%d exempt), %d passed, %d skipped; want 3, 1 (1), 2, 1:\n%s",
			v.ExemptProbes, v.Failed, v.Exempt, v.Passed, v.Skipped, strings.Join(v.Lines, "\n"))
	}
}

func TestSIGVerdictFailsARunWithNoTest(t *testing.T) {
	l, err := readEvents(strings.NewReader(`{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p","Elapsed":0}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := judgeSIG(l); v.OK {
		t.Fatalf("a run that built nothing passed: %+v", v)
	}
}

func TestSIGVerdictFailsARunWhereEveryTestSkipped(t *testing.T) {
	l, err := readEvents(strings.NewReader(`{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestConformanceProfiles"}
{"Action":"output","Package":"p","Test":"TestConformanceProfiles","Output":"    suite.go:210: Skipping: suite does not support the profile\n"}
{"Action":"skip","Package":"p","Test":"TestConformanceProfiles"}
{"Action":"pass","Package":"p"}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := judgeSIG(l); v.OK {
		t.Fatalf("a run where every test skipped passed: %+v", v)
	}
}
