package antctl

import (
	"fmt"
	"strings"
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

// closest returns the candidate nearest to s by edit distance, ignoring
// case; a candidate that starts with s (case-insensitively) wins first, since
// that is how a name is cut short. A candidate farther than a third of s's
// length (at least 2) is no typo.
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
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
