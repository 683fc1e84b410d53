package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// testEvent is one line of go test -json (cmd/test2json's TestEvent).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
	// ImportPath names the package of build-output and build-fail events.
	ImportPath string
}

// testRecord is what a run of go test -json said about one test (or, with
// an empty Test, about the package itself).
type testRecord struct {
	Package string
	Test    string
	// Result is the last of pass, fail or skip ("" if none came: the
	// binary died while the test ran).
	Result string
	// Output is the test's own lines, in order, without the newlines.
	Output []string
}

func (r *testRecord) key() string { return r.Package + "\x00" + r.Test }

// eventLog indexes a stream of events by test.
type eventLog struct {
	records map[string]*testRecord
	order   []*testRecord
	// partial holds a test's output not yet ended by a newline.
	partial map[string]string
	// Malformed counts lines that were not JSON (a binary's stray output).
	Malformed []string
}

func newEventLog() *eventLog {
	return &eventLog{records: map[string]*testRecord{}, partial: map[string]string{}}
}

func (l *eventLog) record(pkg, test string) *testRecord {
	k := pkg + "\x00" + test
	r := l.records[k]
	if r == nil {
		r = &testRecord{Package: pkg, Test: test}
		l.records[k] = r
		l.order = append(l.order, r)
	}
	return r
}

// add takes one event.
func (l *eventLog) add(e testEvent) {
	pkg := e.Package
	if pkg == "" {
		pkg = e.ImportPath
	}
	r := l.record(pkg, e.Test)
	switch e.Action {
	case "output", "build-output":
		text := l.partial[r.key()] + e.Output
		lines := strings.Split(text, "\n")
		l.partial[r.key()] = lines[len(lines)-1]
		r.Output = append(r.Output, lines[:len(lines)-1]...)
	case "pass", "fail", "skip":
		r.Result = e.Action
	case "build-fail":
		r.Result = "fail"
	}
}

// finish flushes output that did not end with a newline.
func (l *eventLog) finish() {
	for _, r := range l.order {
		if p := l.partial[r.key()]; p != "" {
			r.Output = append(r.Output, p)
			l.partial[r.key()] = ""
		}
	}
}

// readEvents reads a whole go test -json stream; tee (if not nil) is given
// each raw line as it comes.
func readEvents(in io.Reader, tee func(line []byte, e *testEvent)) (*eventLog, error) {
	l := newEventLog()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e testEvent
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			l.Malformed = append(l.Malformed, string(line))
			if tee != nil {
				tee(line, nil)
			}
			continue
		}
		l.add(e)
		if tee != nil {
			tee(line, &e)
		}
	}
	l.finish()
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("reading go test -json events: %w", err)
	}
	return l, nil
}

// children are the direct subtests of r.
func (l *eventLog) children(r *testRecord) []*testRecord {
	var out []*testRecord
	for _, c := range l.order {
		if c.Package != r.Package || c.Test == "" || c == r {
			continue
		}
		if r.Test == "" {
			if !strings.Contains(c.Test, "/") {
				out = append(out, c)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(c.Test, r.Test+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, c)
		}
	}
	return out
}

// isFrameLine reports the lines go test itself writes around a test's own
// output (=== RUN, --- PASS and the like).
func isFrameLine(s string) bool {
	t := strings.TrimSpace(s)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- FAIL", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
