// Package suggest finds the closest known name to a mistyped one, so that
// an error about an unknown key, table, pod or command can say which was
// meant.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the candidate nearest to s by edit distance, ignoring
// case, or "" when even the nearest is farther than max(2, len(s)/div) edits:
// then s is no typo of any of them.
func Closest(s string, candidates []string, div int) string {
	ls := strings.ToLower(s)
	best, bestD := "", -1
	for _, c := range candidates {
		d := EditDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/div) {
		return ""
	}
	return best
}

// DidYouMean is ` (did you mean "x"?)` for the Closest candidate x, or "".
func DidYouMean(s string, candidates []string, div int) string {
	if c := Closest(s, candidates, div); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// Guess is the candidate a user most likely meant by s: one that starts
// with s (ignoring case) first, since that is how a name is cut short, else
// the Closest within a third of s's length (at least 2 edits); "" for none.
func Guess(s string, candidates []string) string {
	ls := strings.ToLower(s)
	if ls == "" {
		return ""
	}
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), ls) {
			return c
		}
	}
	return Closest(s, candidates, 3)
}

// Hint is ` (did you mean "x"?)` for the Guess x, or "": what an error
// about an unknown name ends with, so a typo is one step from the right one.
func Hint(s string, candidates []string) string {
	if c := Guess(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// EditDistance is the Levenshtein distance of a and b (bytes).
func EditDistance(a, b string) int {
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
