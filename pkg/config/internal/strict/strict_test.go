package strict

import (
	"reflect"
	"strings"
	"testing"
)

type testSection struct {
	Port  int      `json:"port"`
	Names []string `json:"names,omitempty"`
}

type testConfig struct {
	Gates   map[string]bool `json:"gates,omitempty"`
	Mode    string          `json:"mode"`
	Enabled bool            `json:"enabled"`
	Section testSection     `json:"section"`
}

var testSpec = Spec{
	GatesKey: "gates",
	Gates: []Gate{
		{Name: "Done", Default: true, Implemented: true},
		{Name: "OnUpstream", Default: true},
		{Name: "OffUpstream"},
	},
	Unsupported: []Unsupported{
		{Key: "legacy", Accept: []any{"none"}, Why: "legacy is gone"},
		{Key: "rate", Accept: []any{5000}},
		{Key: "section.extra", AnyValue: true},
		{Key: "feature.enable", Accept: []any{false}},
		{Key: "feature.*", AnyValue: true},
		{Key: "cidrs"},
	},
}

func testDefaults() *testConfig {
	return &testConfig{Gates: map[string]bool{"Done": true}, Mode: "a", Enabled: true, Section: testSection{Port: 1}}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want func(c *testConfig)
	}{
		{name: "an empty file gives the defaults", yaml: ""},
		{name: "a file of comments gives the defaults", yaml: "# mode: b\n"},
		{name: "a key sets its field", yaml: "mode: b\n", want: func(c *testConfig) { c.Mode = "b" }},
		{name: "a nested key sets its field", yaml: "section:\n  port: 7\n", want: func(c *testConfig) { c.Section.Port = 7 }},
		{name: "a null value keeps the default", yaml: "enabled:\nsection:\n  port:\n"},
		{name: "an empty gates mapping keeps the default gates", yaml: "gates:\n"},
		{name: "an implemented gate is decoded", yaml: "gates:\n  Done: false\n", want: func(c *testConfig) { c.Gates["Done"] = false }},
		{name: "an unimplemented gate at its default is dropped", yaml: "gates:\n  OnUpstream: true\n  OffUpstream: false\n"},
		{name: "an unimplemented gate may be turned off", yaml: "gates:\n  OnUpstream: false\n"},
		{name: "an unsupported key at its default is accepted", yaml: "legacy: none\nrate: 5000\n"},
		{name: "an unsupported key of no effect takes any value", yaml: "section:\n  extra: [1, 2]\n"},
		{name: "a wildcard covers the other keys of its section", yaml: "feature:\n  enable: false\n  anything: 3\n"},
		{name: "an empty list is accepted for an unsupported list", yaml: "cidrs: []\n"},
		{name: "a list is decoded", yaml: "section:\n  names: [x, y]\n", want: func(c *testConfig) { c.Section.Names = []string{"x", "y"} }},
		{name: "yes and no are strings as in YAML 1.2", yaml: "mode: yes\nsection:\n  names: [y, n, on, off]\n",
			want: func(c *testConfig) { c.Mode = "yes"; c.Section.Names = []string{"y", "n", "on", "off"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testDefaults()
			if err := Decode("test.conf", []byte(tc.yaml), got, testSpec); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := testDefaults()
			if tc.want != nil {
				tc.want(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each must be a line of the error
	}{
		{name: "an unknown key is named with the closest known key",
			yaml: "mdoe: b\n", want: []string{`test.conf: unknown key "mdoe" (did you mean "mode"?)`}},
		{name: "an unknown nested key is named by its path",
			yaml: "section:\n  prot: 1\n", want: []string{`test.conf: unknown key "section.prot" (did you mean "section.port"?)`}},
		{name: "a key in the wrong section is pointed to its section",
			yaml: "port: 1\n", want: []string{`test.conf: unknown key "port" (did you mean "section.port"?)`}},
		{name: "a key far from any known key gets no suggestion",
			yaml: "completelyDifferent: 1\n", want: []string{`test.conf: unknown key "completelyDifferent"`}},
		{name: "a key differing in case is unknown",
			yaml: "Mode: b\n", want: []string{`test.conf: unknown key "Mode" (did you mean "mode"?)`}},
		{name: "a string for a bool names key and value",
			yaml: "enabled: \"yes\"\n", want: []string{`test.conf: enabled: want true or false, got "yes"`}},
		{name: "yes is not a bool",
			yaml: "enabled: yes\n", want: []string{`test.conf: enabled: want true or false, got "yes"`}},
		{name: "a number for a string is refused",
			yaml: "mode: 3\n", want: []string{`test.conf: mode: want a string, got 3`}},
		{name: "a second document is refused",
			yaml: "mode: a\n---\nmode: b\n", want: []string{`test.conf: not valid YAML: want a single document`}},
		{name: "a string for a nested int names the path",
			yaml: "section:\n  port: \"7\"\n", want: []string{`test.conf: section.port: want an integer, got "7"`}},
		{name: "a fraction for an int is refused",
			yaml: "section:\n  port: 1.5\n", want: []string{`test.conf: section.port: want an integer, got 1.5`}},
		{name: "a scalar for a section is refused",
			yaml: "section: 3\n", want: []string{`test.conf: section: want a mapping of keys, got 3`}},
		{name: "an unknown gate is named",
			yaml: "gates:\n  Dnoe: true\n", want: []string{`test.conf: gates: unknown feature gate "Dnoe" (did you mean "Done"?)`}},
		{name: "a gate that is not a bool is refused",
			yaml: "gates:\n  Done: 1\n", want: []string{`test.conf: gates.Done: want true or false, got 1`}},
		{name: "an unimplemented gate cannot be turned on",
			yaml: "gates:\n  OffUpstream: true\n", want: []string{`test.conf: gates.OffUpstream: true is not supported by this Antrea`}},
		{name: "an unsupported key off its default is refused with the reason",
			yaml: "legacy: ipsec\n", want: []string{`test.conf: legacy: "ipsec" is not supported by this Antrea (legacy is gone; only "none", upstream's default)`}},
		{name: "an unsupported number off its default is refused",
			yaml: "rate: 10\n", want: []string{`test.conf: rate: 10 is not supported by this Antrea (only 5000, upstream's default)`}},
		{name: "an unsupported list must stay empty",
			yaml: "cidrs: [10.0.0.0/8]\n", want: []string{`test.conf: cidrs: ["10.0.0.0/8"] is not supported by this Antrea (only an empty value)`}},
		{name: "a duplicate key is refused",
			yaml: "mode: a\nmode: b\n", want: []string{`test.conf: not valid YAML`}},
		{name: "a list at the top level is refused",
			yaml: "- a\n", want: []string{`test.conf: want a mapping of keys at the top level, got a list`}},
		{name: "every problem is reported",
			yaml: "mdoe: b\nlegacy: x\n", want: []string{`test.conf: unknown key "mdoe"`, `test.conf: legacy: "x" is not supported`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Decode("test.conf", []byte(tc.yaml), testDefaults(), testSpec)
			if err == nil {
				t.Fatal("Decode succeeded, want an error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					if strings.HasPrefix(l, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("no line of the error starts with %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestClosest(t *testing.T) {
	names := []string{"tunnelType", "tunnelCsum", "transportInterface", "ovsBridge"}
	for _, tc := range []struct{ key, want string }{
		{"tunnelTyp", "tunnelType"},
		{"tunneltype", "tunnelType"},
		{"ovsbrige", "ovsBridge"},
		{"transportInterfce", "transportInterface"},
		{"mtu", ""},
	} {
		if got := closest(tc.key, names); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
