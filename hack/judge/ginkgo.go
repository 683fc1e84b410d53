package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The parts of ginkgo v2's JSON report (types.Report, --ginkgo.json-report)
// that a verdict needs.
type ginkgoSuite struct {
	SuiteDescription string
	SuiteSucceeded   bool
	SpecReports      []ginkgoSpec
}

type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	// NumAttempts counts the attempts of a spec run with --flake-attempts:
	// a passed spec with more than one passed only on a retry.
	NumAttempts int
	RunTime     time.Duration
	Failure     *struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

func (s ginkgoSpec) name() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

// e2eRules is what the e2e run exempts and what it holds strictly.
type e2eRules struct {
	// Focus selects the specs the run is about (others are not listed).
	Focus *regexp.Regexp
	// Skip is the run's --ginkgo.skip (E2E_SKIP): its specs are listed as
	// skipped on purpose.
	Skip *regexp.Regexp
	// SCTP names the specs skipped because this kernel has no SCTP, and
	// SCTPReason says so.
	SCTP       *regexp.Regexp
	SCTPReason string
	// Strict names the specs (NetworkPolicy) whose retry is a failure: a
	// second attempt means a wrong reachability matrix was seen.
	Strict *regexp.Regexp
}

// Spec outcomes as listed.
const (
	specPassed  = "passed"
	specFlaky   = "flaky"
	specSkipped = "skipped"
)

// specResult is one listed spec.
type specResult struct {
	// Outcome is passed, flaky, skipped or ginkgo's failing state (failed,
	// timedout, panicked, interrupted, aborted).
	Outcome string
	RunTime time.Duration
	Name    string
	Reason  string
	// Fails is true when this spec makes the run fail.
	Fails bool
}

// e2eVerdict is the run's verdict and its counts.
type e2eVerdict struct {
	OK                             bool
	Passed, Flaky, Failed, Skipped int
	// StrictFlaky counts the flaky specs that fail the run.
	StrictFlaky int
	// Reasons says why the run fails (empty when it passes).
	Reasons []string
	Results []specResult
}

// judgeSpecs lists the focused specs of a ginkgo report and decides the
// run: it fails when a spec failed (in any way but skipped), when a spec
// held strictly passed only on a retry, when no focused spec ran, or when a
// suite failed without a failed spec (a failure outside any spec: setup,
// a timeout of the whole suite).
func judgeSpecs(suites []ginkgoSuite, r e2eRules) e2eVerdict {
	var v e2eVerdict
	for _, s := range suites {
		failedHere := 0
		for _, sp := range s.SpecReports {
			if sp.LeafNodeType != "It" {
				if sp.State != "passed" && sp.State != "skipped" && sp.State != "pending" {
					// A BeforeSuite/AfterSuite that failed fails the run.
					v.Reasons = append(v.Reasons, fmt.Sprintf("%s node of suite %q %s: %s", sp.LeafNodeType, s.SuiteDescription, sp.State, failureText(sp)))
					failedHere++
				}
				continue
			}
			name := sp.name()
			ran := sp.State != "skipped" && sp.State != "pending"
			if r.Focus != nil && !r.Focus.MatchString(name) && !ran {
				// Unselected specs are not listed; a spec that ran is,
				// whatever its name, so that no failure is ever dropped.
				continue
			}
			res := specResult{RunTime: sp.RunTime, Name: name}
			switch {
			case sp.State == "passed" && sp.NumAttempts > 1:
				res.Outcome = specFlaky
				v.Flaky++
				res.Reason = fmt.Sprintf("passed at attempt %d; the failed attempts are in e2e.log", sp.NumAttempts)
				if r.Strict != nil && r.Strict.MatchString(name) {
					res.Fails = true
					v.StrictFlaky++
					res.Reason += "; a NetworkPolicy spec that needs a retry saw a wrong reachability matrix: the run fails"
				}
			case sp.State == "passed":
				res.Outcome = specPassed
				v.Passed++
			case sp.State == "skipped" || sp.State == "pending":
				res.Outcome = specSkipped
				v.Skipped++
				switch {
				case r.SCTP != nil && r.SCTP.MatchString(name):
					res.Reason = r.SCTPReason
				case r.Skip != nil && r.Skip.String() != "" && r.Skip.MatchString(name):
					res.Reason = fmt.Sprintf("skipped by E2E_SKIP %q", r.Skip.String())
				case sp.Failure != nil && sp.Failure.Message != "":
					res.Reason = firstLine(sp.Failure.Message)
				default:
					res.Reason = "not selected by the focus"
				}
			default:
				res.Outcome = sp.State
				res.Fails = true
				res.Reason = failureText(sp)
				v.Failed++
				failedHere++
			}
			v.Results = append(v.Results, res)
		}
		if !s.SuiteSucceeded && failedHere == 0 {
			v.Reasons = append(v.Reasons, fmt.Sprintf("suite %q failed without a failed spec (see e2e.log)", s.SuiteDescription))
		}
	}
	if v.Failed > 0 {
		v.Reasons = append(v.Reasons, fmt.Sprintf("%d spec(s) failed", v.Failed))
	}
	if v.StrictFlaky > 0 {
		var names []string
		for _, r := range v.Results {
			if r.Outcome == specFlaky && r.Fails {
				names = append(names, fmt.Sprintf("%q", r.Name))
			}
		}
		sort.Strings(names)
		v.Reasons = append(v.Reasons, fmt.Sprintf("%d NetworkPolicy spec(s) passed only on a retry (%s; its failed attempt is in e2e.log)",
			v.StrictFlaky, strings.Join(names, ", ")))
	}
	if v.Passed+v.Flaky+v.Failed == 0 {
		v.Reasons = append(v.Reasons, "no selected spec ran")
	}
	v.OK = len(v.Reasons) == 0
	sort.SliceStable(v.Results, func(i, j int) bool {
		a, b := outcomeRank(v.Results[i]), outcomeRank(v.Results[j])
		if a != b {
			return a < b
		}
		return v.Results[i].Name < v.Results[j].Name
	})
	return v
}

// outcomeRank orders the list so that the end of the output (what a CI
// log's tail keeps) names every failure: passed, skipped, flaky, failed.
func outcomeRank(r specResult) int {
	switch {
	case r.Outcome == specPassed:
		return 0
	case r.Outcome == specSkipped:
		return 1
	case r.Outcome == specFlaky && !r.Fails:
		return 2
	case r.Outcome == specFlaky:
		return 3
	default:
		return 4
	}
}

func failureText(sp ginkgoSpec) string {
	if sp.Failure == nil {
		return "(no failure message)"
	}
	return fmt.Sprintf("%s (at %s:%d)", firstLine(sp.Failure.Message), filepath.Base(sp.Failure.Location.FileName), sp.Failure.Location.LineNumber)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// printSpecs writes one line per spec (and its reason under it).
func printSpecs(w io.Writer, v e2eVerdict) {
	for _, r := range v.Results {
		out := r.Outcome
		if r.Fails && r.Outcome == specFlaky {
			out = "FLAKY"
		}
		fmt.Fprintf(w, "%-8s %6s  %s\n", out, fmt.Sprintf("%ds", int(r.RunTime.Seconds())), r.Name)
		if r.Reason != "" {
			fmt.Fprintf(w, "                 -> %s\n", r.Reason)
		}
	}
}

// verdictText is the summary printed last.
func verdictText(v e2eVerdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d passed, %d flaky (passed at a later attempt; %d of them NetworkPolicy specs, which fail the run), %d failed, %d skipped\n",
		v.Passed, v.Flaky, v.StrictFlaky, v.Failed, v.Skipped)
	if v.OK {
		b.WriteString("verdict: PASS\n")
	} else {
		fmt.Fprintf(&b, "verdict: FAIL: %s\n", strings.Join(v.Reasons, "; "))
	}
	return b.String()
}

// writeTSV keeps the list for scripts: outcome, seconds, name, reason.
func writeTSV(path string, v e2eVerdict) error {
	var b strings.Builder
	for _, r := range v.Results {
		out := r.Outcome
		if r.Fails && r.Outcome == specFlaky {
			out = "flaky-fails"
		}
		fmt.Fprintf(&b, "%s\t%ds\t%s\t%s\n", out, int(r.RunTime.Seconds()), r.Name, r.Reason)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func runGinkgo(args []string) (bool, error) {
	fs := newFlags("ginkgo")
	report := fs.String("report", "", "ginkgo JSON report (--ginkgo.json-report)")
	focus := fs.String("focus", "", "regex: the specs to list (the run's --ginkgo.focus)")
	skip := fs.String("skip", "", "regex: the run's --ginkgo.skip")
	sctp := fs.String("sctp", `\[Feature:SCTPConnectivity\]`, "regex: specs skipped because the kernel has no SCTP")
	sctpReason := fs.String("sctp-reason", "this kernel has no SCTP", "why the SCTP specs are skipped")
	strict := fs.String("strict", `Netpol|NetworkPolicy`, "regex: specs for which passing only on a retry fails the run")
	tsv := fs.String("tsv", "", "also write the list here (tab-separated)")
	verdictFile := fs.String("verdict", "", "also write the summary and verdict here")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	var rules e2eRules
	var err error
	for _, p := range []struct {
		re  **regexp.Regexp
		src string
	}{{&rules.Focus, *focus}, {&rules.Skip, *skip}, {&rules.SCTP, *sctp}, {&rules.Strict, *strict}} {
		if p.src == "" {
			continue
		}
		if *p.re, err = regexp.Compile(p.src); err != nil {
			return false, err
		}
	}
	rules.SCTPReason = *sctpReason
	data, err := os.ReadFile(*report)
	if err != nil {
		return false, err
	}
	var suites []ginkgoSuite
	if err := json.Unmarshal(data, &suites); err != nil {
		return false, fmt.Errorf("%s: %w", *report, err)
	}
	v := judgeSpecs(suites, rules)
	printSpecs(os.Stdout, v)
	if *tsv != "" {
		if err := writeTSV(*tsv, v); err != nil {
			return false, err
		}
	}
	text := verdictText(v)
	if *verdictFile != "" {
		if err := os.WriteFile(*verdictFile, []byte(text), 0o644); err != nil {
			return false, err
		}
	} else {
		fmt.Print(text)
	}
	return v.OK, nil
}
