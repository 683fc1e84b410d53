package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// goTestPrinter turns go test -json events back into what go test prints
// without -json (and without -v): each package's result line, build
// errors, and the whole output of a top-level test that failed.
type goTestPrinter struct {
	w *bufio.Writer
	// held is the output of running top-level tests, printed if they fail.
	held map[string][]string
}

func newGoTestPrinter(w io.Writer) *goTestPrinter {
	return &goTestPrinter{w: bufio.NewWriter(w), held: map[string][]string{}}
}

func (p *goTestPrinter) event(e *testEvent) {
	if e == nil {
		return
	}
	top, _, _ := strings.Cut(e.Test, "/")
	key := e.Package + "\x00" + top
	switch {
	case e.Action == "build-output":
		p.w.WriteString(e.Output)
	case e.Test == "" && e.Action == "output":
		// The package's own lines: ok/FAIL/? lines, a panic outside a test.
		if strings.TrimSpace(e.Output) != "PASS" {
			p.w.WriteString(e.Output)
		}
	case e.Action == "output":
		p.held[key] = append(p.held[key], e.Output)
	case e.Test == top && (e.Action == "pass" || e.Action == "skip"):
		delete(p.held, key)
	case e.Test == top && e.Action == "fail":
		for _, s := range p.held[key] {
			p.w.WriteString(s)
		}
		delete(p.held, key)
	}
	if e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
		// A package ended: a test that never ended (the binary died)
		// shows what it printed.
		for k, lines := range p.held {
			if strings.HasPrefix(k, e.Package+"\x00") {
				for _, s := range lines {
					p.w.WriteString(s)
				}
				delete(p.held, k)
			}
		}
		p.w.Flush()
	}
}

// skippedTest is a test that skipped, with its reason.
type skippedTest struct {
	Package, Test, Reason string
}

// goTestSummary is what a go test -json run says at its end.
type goTestSummary struct {
	Skipped []skippedTest
	// Failed lists the failed tests and packages ("pkg" or "pkg TestX").
	Failed []string
	// Passed counts the tests that passed.
	Passed int
}

// summarizeGoTest lists the skipped tests (a subtest under a skipped
// parent is not listed twice: a parent skipped before its subtests ran has
// none) and the failures.
func summarizeGoTest(l *eventLog) goTestSummary {
	var s goTestSummary
	tests := map[string]int{}
	for _, r := range l.order {
		if r.Test != "" {
			tests[r.Package]++
		}
	}
	for _, r := range l.order {
		switch {
		case r.Test == "":
			if r.Result == "fail" {
				s.Failed = append(s.Failed, r.Package)
			}
			// A package with tests that ran none of them (a TestMain that
			// returned early) is a skip too; [no test files] is not.
			if r.Result == "pass" && tests[r.Package] == 0 {
				s.Skipped = append(s.Skipped, skippedTest{Package: r.Package, Test: "(every test of the package)",
					Reason: "the package passed without running a test: " + lastWords(r.Output)})
			}
		case r.Result == "skip":
			s.Skipped = append(s.Skipped, skippedTest{Package: r.Package, Test: r.Test, Reason: skipReason(r.Output)})
		case r.Result == "fail":
			s.Failed = append(s.Failed, r.Package+" "+r.Test)
		case r.Result == "pass":
			s.Passed++
		}
	}
	return s
}

// skipReason is the message of t.Skip: the last line of the test's own
// output, without its file:line prefix (so that tests skipped for one
// reason at different lines group together).
func skipReason(lines []string) string {
	w := lastWords(lines)
	if w == "no message" {
		return "skipped without a message"
	}
	if m := logLine.FindStringSubmatch(w); m != nil && m[1] != "" {
		return m[1]
	}
	return w
}

// printSkipped writes the skipped tests grouped by package and reason, so
// that a reason shared by many tests (no root, no lab) is one line.
func printSkipped(w io.Writer, s goTestSummary) {
	type group struct {
		pkg, reason string
		tests       []string
	}
	groups := map[string]*group{}
	var keys []string
	for _, t := range s.Skipped {
		k := t.Package + "\x00" + t.Reason
		g := groups[k]
		if g == nil {
			g = &group{pkg: t.Package, reason: t.Reason}
			groups[k] = g
			keys = append(keys, k)
		}
		g.tests = append(g.tests, t.Test)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\nskipped tests: %d (by package and reason)\n", len(s.Skipped))
	for _, k := range keys {
		g := groups[k]
		names := g.tests
		more := ""
		if len(names) > 4 {
			more = fmt.Sprintf(" and %d more", len(names)-4)
			names = names[:4]
		}
		fmt.Fprintf(w, "  %s: %s%s\n      -> %s\n", g.pkg, strings.Join(names, ", "), more, g.reason)
	}
	fmt.Fprintf(w, "go test: %d tests passed, %d skipped, %d failed\n", s.Passed, len(s.Skipped), len(s.Failed))
	for _, f := range s.Failed {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
}

func runGoTest(args []string, in io.Reader, out io.Writer) (bool, error) {
	fs := newFlags("gotest")
	file := fs.String("o", "", "write the go test -json events here too")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	var sink *bufio.Writer
	if *file != "" {
		f, err := os.Create(*file)
		if err != nil {
			return false, err
		}
		defer f.Close()
		sink = bufio.NewWriter(f)
		defer sink.Flush()
	}
	p := newGoTestPrinter(out)
	l, err := readEvents(in, func(line []byte, e *testEvent) {
		if sink != nil {
			sink.Write(line)
			sink.WriteByte('\n')
		}
		if e == nil {
			// Not an event: go test's own message (a flag error).
			p.w.Write(line)
			p.w.WriteByte('\n')
			return
		}
		p.event(e)
	})
	p.w.Flush()
	if err != nil {
		return false, err
	}
	s := summarizeGoTest(l)
	printSkipped(out, s)
	return len(s.Failed) == 0, nil
}
