package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The SIG network-policy-api conformance suites (v0.1.7, v0.2.0) probe with
// kubernetes.PokeServer: each probe that does not give the expected result
// logs "FAILED Command was [/agnhost connect ... --protocol=P HOST:PORT]"
// (or "FAILED to execute command ..." when kubectl exec itself failed), then
// the probe's assertion fails: v0.1.7 asserts the returned bool
// (assert.True: "Should be true"), v0.2.0 retries inside require.Eventually
// ("Condition never satisfied") and asserts once more ("Should be true").
// Every other failure is another assertion (require.NoError, ...) or a
// t.Fatal, a panic or a timeout.

// exemptProbeErrors are the testify errors of a probe's own assertion.
var exemptProbeErrors = map[string]bool{"Condition never satisfied": true, "Should be true": true}

var (
	// logLine is a t.Log line: "    file.go:123: message".
	logLine = regexp.MustCompile(`^\s*[^\s:]+\.go:\d+: ?(.*)$`)
)

// assertion is one failed testify assertion in a test's output.
type assertion struct {
	Error    string
	Messages string
	// Where is the first frame of the Error Trace.
	Where string
	// SCTPProbe is true when the assertion is a probe's and the probe it
	// judged (the last one logged right before it) was an SCTP connect that
	// ran and failed.
	SCTPProbe bool
	// Probe is that probe's logged command, if any.
	Probe string
}

func (a assertion) String() string {
	s := strings.ReplaceAll(a.Error, "\n", " ")
	if a.Messages != "" {
		s += " (" + a.Messages + ")"
	}
	if a.Where != "" {
		s += " at " + a.Where
	}
	if a.Probe != "" {
		s += "; last probe: " + a.Probe
	}
	return s
}

// assertions finds the failed testify assertions in a test's own output and
// tells which are SCTP probes.
func assertions(lines []string) []assertion {
	var out []assertion
	// lastProbe is the last probe line seen and not yet judged by an
	// assertion; exec is true for a failed kubectl exec.
	type probe struct {
		cmd        string
		sctp, exec bool
	}
	var last *probe
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := logLine.FindStringSubmatch(line); m != nil {
			msg := m[1]
			switch {
			case strings.HasPrefix(msg, "FAILED Command was"):
				cmd := strings.TrimSpace(strings.TrimPrefix(msg, "FAILED Command was"))
				last = &probe{cmd: cmd, sctp: strings.Contains(cmd, "--protocol=sctp")}
			case strings.HasPrefix(msg, "FAILED to execute command"):
				last = &probe{cmd: msg, exec: true}
			}
			continue
		}
		if !strings.Contains(line, "Error Trace:") {
			continue
		}
		a := assertion{Where: strings.TrimSpace(after(line, "Error Trace:"))}
		// The block runs until the next log line or the next block.
		field := ""
		for i+1 < len(lines) {
			next := lines[i+1]
			if logLine.MatchString(next) || strings.Contains(next, "Error Trace:") || isFrameLine(next) {
				break
			}
			i++
			t := strings.TrimSpace(next)
			switch {
			case strings.HasPrefix(t, "Error:"):
				field, a.Error = "error", strings.TrimSpace(strings.TrimPrefix(t, "Error:"))
			case strings.HasPrefix(t, "Messages:"):
				field, a.Messages = "messages", strings.TrimSpace(strings.TrimPrefix(t, "Messages:"))
			case strings.HasPrefix(t, "Test:"):
				field = "test"
			case field == "error" && t != "":
				a.Error += "\n" + t
			}
		}
		if last != nil {
			a.Probe = last.cmd
			a.SCTPProbe = exemptProbeErrors[a.Error] && last.sctp && !last.exec
		}
		// A probe is judged by one assertion: a second one after it is not
		// about that probe.
		last = nil
		out = append(out, a)
	}
	return out
}

func after(s, sep string) string {
	if i := strings.Index(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return ""
}

// sigFailure is a failure that is not exempt.
type sigFailure struct {
	Test string
	What string
}

// sigVerdict is the run's verdict.
type sigVerdict struct {
	OK bool
	// Lines lists each second-level test (the suite's tests) with its result.
	Lines []string
	// Passed, Failed, Skipped count those tests; Exempt the failed ones whose
	// every failure is an SCTP probe.
	Passed, Failed, Skipped, Exempt int
	// ExemptProbes counts the SCTP probe assertions that were forgiven.
	ExemptProbes int
	Failures     []sigFailure
}

// judgeSIG decides a SIG suite's run from its go test -json events: it
// passes only when every failed assertion of every failed test is a failed
// SCTP probe (this kernel has no SCTP), and nothing else failed: a failed
// test with no assertion of its own and no failed subtest (t.Fatal, a
// panic, a timeout), a package that failed without a failed test, a panic
// anywhere, or a run where no test passed, all fail it.
func judgeSIG(l *eventLog) sigVerdict {
	var v sigVerdict
	ran := 0
	var walk func(r *testRecord) bool
	// walk judges r and its subtests; it returns whether r's failure (if
	// any) is exempt.
	walk = func(r *testRecord) bool {
		ok := true
		failedChildren := 0
		for _, c := range l.children(r) {
			if c.Result == "fail" || c.Result == "" {
				failedChildren++
			}
			if !walk(c) {
				ok = false
			}
		}
		if r.Test == "" {
			return ok
		}
		ran++
		as := assertions(r.Output)
		for _, a := range as {
			if a.SCTPProbe {
				v.ExemptProbes++
				continue
			}
			ok = false
			v.Failures = append(v.Failures, sigFailure{Test: r.Test, What: a.String()})
		}
		switch {
		case r.Result == "":
			ok = false
			v.Failures = append(v.Failures, sigFailure{Test: r.Test, What: "never ended (the test binary died or timed out while it ran; see test.log)"})
		case r.Result == "fail" && len(as) == 0 && failedChildren == 0:
			ok = false
			v.Failures = append(v.Failures, sigFailure{Test: r.Test, What: "failed without a testify assertion (t.Fatal, t.Error, a panic or a timeout): " + lastWords(r.Output)})
		}
		for _, line := range r.Output {
			if strings.HasPrefix(strings.TrimSpace(line), "panic: ") {
				ok = false
				v.Failures = append(v.Failures, sigFailure{Test: r.Test, What: strings.TrimSpace(line)})
			}
		}
		return ok
	}
	packages := 0
	for _, r := range l.order {
		if r.Test != "" {
			continue
		}
		packages++
		walk(r)
		for _, line := range r.Output {
			t := strings.TrimSpace(line)
			if strings.HasPrefix(t, "panic: ") {
				v.Failures = append(v.Failures, sigFailure{Test: r.Package, What: t})
			}
		}
		if r.Result == "fail" && !anyTestFailed(l, r.Package) {
			v.Failures = append(v.Failures, sigFailure{Test: r.Package, What: "the package failed without a failed test (build failure, TestMain, timeout): " + lastWords(r.Output)})
		}
		if r.Result == "" {
			v.Failures = append(v.Failures, sigFailure{Test: r.Package, What: "the package never ended (no pass or fail event)"})
		}
	}
	passed := 0
	for _, r := range l.order {
		if r.Test != "" && r.Result == "pass" {
			passed++
		}
	}
	if packages == 0 || ran == 0 || passed == 0 {
		v.Failures = append(v.Failures, sigFailure{Test: "(run)", What: "no test ran and passed (every test skipped, or none selected)"})
	}
	// The list: the suite's tests, one level under the top-level tests.
	for _, top := range l.order {
		if top.Test == "" || strings.Contains(top.Test, "/") {
			continue
		}
		kids := l.children(top)
		if len(kids) == 0 {
			kids = []*testRecord{top}
		}
		for _, k := range kids {
			note := ""
			switch k.Result {
			case "pass":
				v.Passed++
			case "skip":
				v.Skipped++
				note = "  (" + lastWords(k.Output) + ")"
			default:
				v.Failed++
				exempt, other := countUnder(l, k)
				if other == 0 && exempt > 0 {
					v.Exempt++
					note = fmt.Sprintf("  (exempt: its %d failed assertion(s) are all SCTP probes)", exempt)
				} else {
					note = fmt.Sprintf("  (%d failure(s) not exempt, %d SCTP probe(s))", other, exempt)
				}
			}
			v.Lines = append(v.Lines, fmt.Sprintf("%-5s %s%s", resultWord(k.Result), strings.TrimPrefix(k.Test, top.Test+"/"), note))
		}
	}
	v.OK = len(v.Failures) == 0
	return v
}

// countUnder counts the exempt and the other failures of r and its subtests.
func countUnder(l *eventLog, r *testRecord) (exempt, other int) {
	for _, a := range assertions(r.Output) {
		if a.SCTPProbe {
			exempt++
		} else {
			other++
		}
	}
	failedChildren := 0
	for _, c := range l.children(r) {
		if c.Result != "pass" && c.Result != "skip" {
			failedChildren++
		}
		e, o := countUnder(l, c)
		exempt, other = exempt+e, other+o
	}
	if (r.Result == "fail" && exempt+other == 0 && failedChildren == 0) || r.Result == "" {
		other++
	}
	return exempt, other
}

func anyTestFailed(l *eventLog, pkg string) bool {
	for _, r := range l.order {
		if r.Package == pkg && r.Test != "" && r.Result == "fail" {
			return true
		}
	}
	return false
}

func resultWord(r string) string {
	switch r {
	case "pass":
		return "PASS"
	case "skip":
		return "SKIP"
	case "fail":
		return "FAIL"
	}
	return "DIED"
}

// lastWords is the last line of a test's own output that is not go test's
// framing: a skip's reason, a t.Fatal's message.
func lastWords(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		t := strings.TrimSpace(lines[i])
		if t == "" || isFrameLine(t) || t == "PASS" || t == "FAIL" {
			continue
		}
		return t
	}
	return "no message"
}

func printSIG(w io.Writer, name string, v sigVerdict) {
	for _, l := range v.Lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "[%s] %d passed, %d failed (%d of them only at SCTP probes: %d probe assertions exempt), %d skipped\n",
		name, v.Passed, v.Failed, v.Exempt, v.ExemptProbes, v.Skipped)
	for _, f := range v.Failures {
		fmt.Fprintf(w, "[%s] NOT EXEMPT: %s: %s\n", name, f.Test, f.What)
	}
	if v.OK {
		if v.ExemptProbes > 0 {
			fmt.Fprintf(w, "[%s] verdict: PASS (every failed assertion is an SCTP probe, exempt: this kernel has no SCTP)\n", name)
		} else {
			fmt.Fprintf(w, "[%s] verdict: PASS\n", name)
		}
	} else {
		fmt.Fprintf(w, "[%s] verdict: FAIL (%d failure(s) not exempt)\n", name, len(v.Failures))
	}
}

func runSIG(args []string) (bool, error) {
	fs := newFlags("sig")
	events := fs.String("json", "", "the suite's go test -json events")
	name := fs.String("name", "", "the suite's name in the output (default: the file's directory)")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	f, err := os.Open(*events)
	if err != nil {
		return false, err
	}
	defer f.Close()
	l, err := readEvents(f, nil)
	if err != nil {
		return false, err
	}
	if *name == "" {
		*name = filepath.Base(filepath.Dir(*events))
	}
	v := judgeSIG(l)
	printSIG(os.Stdout, *name, v)
	return v.OK, nil
}
