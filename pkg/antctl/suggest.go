package antctl

import "antrea.io/antrea/pkg/util/suggest"

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to s,
// or "" when none is near enough to be a typo of s (suggest.Hint). Every
// "unknown X" error of antctl ends with it, so a typo is one step from the
// right command.
func didYouMean(s string, candidates []string) string { return suggest.Hint(s, candidates) }

// closest returns the candidate the user most likely meant (suggest.Guess).
func closest(s string, candidates []string) string { return suggest.Guess(s, candidates) }
