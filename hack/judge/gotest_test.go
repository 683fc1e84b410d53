package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// testdata/gotest holds the real go test -json events of a_test.go.txt:
// pass.json, and fail.json where TestFails failed.
func runGoTestOn(t *testing.T, file string) (bool, string) {
	t.Helper()
	f, err := os.Open("testdata/gotest/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	kept := t.TempDir() + "/events.json"
	ok, err := runGoTest([]string{"-o", kept}, f, &out)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile("testdata/gotest/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, orig) {
		t.Errorf("the events kept in -o differ from the events read")
	}
	return ok, out.String()
}

func TestGoTestListsEverySkippedTestWithItsReason(t *testing.T) {
	ok, out := runGoTestOn(t, "pass.json")
	if !ok {
		t.Fatalf("a passing run was judged failed:\n%s", out)
	}
	for _, want := range []string{
		"skipped tests: 7",
		"skipmimic: TestNeedsABinary\n      -> e2e.test is missing (stat /nonexistent/bin/e2e.test: no such file or directory): run make install",
		"skipmimic: TestCases/a, TestCases/b, TestCases/c, TestCases/d and 2 more\n      -> not root",
		"ok  \tskipmimic",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	// Like go test without -v: a passing test's lines are not printed.
	if strings.Contains(out, "=== RUN   TestPasses") {
		t.Errorf("a passing test's output was printed:\n%s", out)
	}
}

func TestGoTestFailsAndPrintsAFailedTest(t *testing.T) {
	ok, out := runGoTestOn(t, "fail.json")
	if ok {
		t.Fatalf("a run with a failed test was judged passed:\n%s", out)
	}
	for _, want := range []string{"a_test.go:24: broken", "--- FAIL: TestFails", "FAILED: skipmimic TestFails"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

func TestGoTestListsAPackageThatRanNoTest(t *testing.T) {
	in := strings.NewReader(`{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s [no tests to run]\n"}
{"Action":"pass","Package":"p","Elapsed":0.01}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"?   \tq\t[no test files]\n"}
{"Action":"skip","Package":"q","Elapsed":0}
`)
	var out bytes.Buffer
	if _, err := runGoTest(nil, in, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "p: (every test of the package)\n      -> the package passed without running a test: ok  \tp\t0.01s [no tests to run]") ||
		strings.Contains(out.String(), "q: (every") {
		t.Fatalf("want p listed as skipped, q (no test files) not:\n%s", out.String())
	}
}
