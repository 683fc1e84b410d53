package dnsname

import (
	"regexp"
	"strings"
	"testing"
)

// regexpOf is the documented semantics written as upstream writes it: each
// "*" is ".*", the rest literal, the whole name anchored.
func regexpOf(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

func TestAPatternMatchesTheNamesItsRegularExpressionMatches(t *testing.T) {
	patterns := []string{"api.example.test", "*.example.test", "*example.test", "*", "a*b*c.test", "*.*.test", "web-*.svc.local", "x*"}
	names := []string{"api.example.test", "example.test", "a.example.test", "a.b.example.test", "xexample.test", "example.test.evil",
		"abc.test", "aXbYc.test", "ac.test", "abbc.test", "a.b.test", "b.test", "web-1.svc.local", "web-.svc.local", "x", "", "cba.test"}
	for _, p := range patterns {
		re := regexpOf(p)
		for _, n := range names {
			if got, want := Match(p, n), re.MatchString(n); got != want {
				t.Errorf("Match(%q, %q) = %t, the regular expression %s says %t", p, n, got, re, want)
			}
		}
	}
}

func TestNamesAreComparedWithoutCaseNorTrailingDot(t *testing.T) {
	if !Match(Normalize("*.Example.TEST."), Normalize("API.example.test.")) {
		t.Error("a pattern in upper case with a trailing dot did not match the same name in another case")
	}
}

func TestValidateRefusesWhatIsNotAName(t *testing.T) {
	for _, ok := range []string{"api.example.test", "*.example.test", "*foobar.com", "svcA.default.svc.cluster.local", "example.test.", "_srv._tcp.example.test", "*"} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q): %v, want accepted", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "a..b", ".example.test", "exa mple.test", "http://example.test", "10.0.0.0/8", strings.Repeat("a.", 130) + "test",
		strings.Repeat("a", 64) + ".test"} {
		if err := Validate(bad); err == nil {
			t.Errorf("Validate(%q) accepted it", bad)
		}
	}
}
