package suggest

import "testing"

func TestClosestNamesTheTypoTargetAndNothingFarAway(t *testing.T) {
	names := []string{"tunnelType", "tunnelCsum", "ovsBridge", "Classifier"}
	for _, tc := range []struct {
		in   string
		div  int
		want string
	}{
		{"tunnelTyp", 4, "tunnelType"},  // one letter dropped
		{"TUNNELTYPE", 4, "tunnelType"}, // case is ignored
		{"clasifier", 3, "Classifier"},  // one letter dropped, other case
		{"ovsBrige", 4, "ovsBridge"},    // within 2 edits
		{"somethingElse", 4, ""},        // no candidate near enough
		{"", 4, ""},                     // nothing typed: all are 10+ edits away
	} {
		if got := Closest(tc.in, names, tc.div); got != tc.want {
			t.Errorf("Closest(%q, div %d) = %q, want %q", tc.in, tc.div, got, tc.want)
		}
	}
	if got := DidYouMean("tunnelTyp", names, 4); got != ` (did you mean "tunnelType"?)` {
		t.Errorf("DidYouMean = %q", got)
	}
	if got := Closest("x", nil, 4); got != "" {
		t.Errorf("no candidates: %q", got)
	}
}

func TestEditDistanceCountsInsertionsDeletionsAndSubstitutions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "abd", 1}, {"abc", "ab", 1}, {"ab", "abc", 1}, {"kitten", "sitting", 3}} {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestGuessPrefersANameCutShortThenATypo(t *testing.T) {
	names := []string{"networkpolicy", "netpol", "appliedtogroup", "addressgroup"}
	for in, want := range map[string]string{
		"NETW":           "networkpolicy", // a prefix, any case, wins
		"adressgroup":    "addressgroup",  // one letter dropped
		"appliedtogruop": "appliedtogroup",
		"pods":           "", // no prefix, no typo
		"":               "", // nothing typed
	} {
		if got := Guess(in, names); got != want {
			t.Errorf("Guess(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Hint("netw", names); got != ` (did you mean "networkpolicy"?)` {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("pods", names); got != "" {
		t.Errorf("Hint of no near name = %q, want none", got)
	}
}
