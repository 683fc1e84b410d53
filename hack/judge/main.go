// Command judge decides whether a test run passed, from the run's own
// machine-readable report rather than from grep counts of its log:
//
//	judge ginkgo   upstream e2e.test's --ginkgo.json-report (hack/e2e-upstream.sh)
//	judge sig      the SIG network-policy-api suites' go test -json events (hack/conformance-sig.sh)
//	judge gotest   go test -json on stdin: go test's usual output, the events
//	               kept in a file, and at the end every skipped test and why (hack/test.sh)
//
// Each verdict is a pure function of the report (judgeSpecs, judgeSIG,
// summarizeGoTest) with its own unit tests, so that a judge is shown to fail
// where it should: an injected failure in a saved report must end red.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	var ok bool
	switch os.Args[1] {
	case "ginkgo":
		ok, err = runGinkgo(os.Args[2:])
	case "sig":
		ok, err = runSIG(os.Args[2:])
	case "gotest":
		ok, err = runGoTest(os.Args[2:], os.Stdin, os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "judge %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: judge ginkgo|sig|gotest [flags] (judge CMD -h for the flags)")
	os.Exit(2)
}

// newFlags is a FlagSet that reports its errors instead of exiting.
func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet("judge "+name, flag.ContinueOnError)
}
