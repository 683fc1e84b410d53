package antctl

import (
	"fmt"
	"strings"

	"antrea.io/antrea/pkg/util/suggest"
)

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to s,
// or "" when none is near enough to be a typo of s. Every "unknown X" error
// of antctl ends with it, so a typo is one step from the right command.
func didYouMean(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// closest returns the candidate nearest to s, ignoring case; a candidate
// that starts with s (case-insensitively) wins first, since that is how a
// name is cut short. A candidate farther than a third of s's length (at
// least 2 edits) is no typo.
func closest(s string, candidates []string) string {
	ls := strings.ToLower(s)
	if ls == "" {
		return ""
	}
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), ls) {
			return c
		}
	}
	return suggest.Closest(s, candidates, 3)
}
