package component

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"json", "mapping", "filter", "stdout", "generate", "thread_num", "a", "b"}
	tests := map[string]string{
		"jsno":      "json",     // transposition
		"stdot":     "stdout",   // deletion
		"generat":   "generate", // deletion
		"thread_nm": "thread_num",
		"maping":    "mapping",
		"c":         "", // one letter is no typo of another
		"loud":      "",
		"csv":       "",
		"":          "",
		"fitler":    "filter",
	}
	for in, want := range tests {
		if got := Suggest(in, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"json", "jsno", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
