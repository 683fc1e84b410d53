package lab

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// differentOptions has every field of Options set, by reflection, to a value
// no default has, so a field that no flag carries shows up as lost.
func differentOptions(t *testing.T) Options {
	t.Helper()
	var o Options
	v := reflect.ValueOf(&o).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("/not/a/default/" + v.Type().Field(i).Name)
		case reflect.Int:
			f.SetInt(int64(40 + i))
		case reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("Options.%s is a %s: teach this test (and AddGlobalFlags/AddUpFlags) about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	return o
}

// parse reads args as antrea-lab up would, starting from the defaults.
func parse(t *testing.T, args []string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	o.AddGlobalFlags(fs)
	o.AddUpFlags(fs)
	fs.Bool("foreground", false, "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Fatalf("parse %q: arguments left over: %q", args, fs.Args())
	}
	return o
}

func TestTheDetachedSupervisorIsGivenEveryOptionUpWasGiven(t *testing.T) {
	want := differentOptions(t)
	args := supervisorArgs(want)
	if len(args) < 2 || args[0] != "up" || args[1] != "--foreground" {
		t.Fatalf("supervisor args %q: want up --foreground first", args)
	}
	if got := parse(t, args[2:]); got != want {
		t.Errorf("the supervisor would run with\n%+v\nnot the options up was given\n%+v\n(args %q)", got, want, args)
	}
}

func TestGlobalAndUpArgsParseBackToTheSameOptions(t *testing.T) {
	for _, o := range []Options{DefaultOptions(), differentOptions(t)} {
		args := append(o.UpArgs(), o.GlobalArgs()...)
		if got := parse(t, args); got != o {
			t.Errorf("%q parse to\n%+v\nwant\n%+v", args, got, o)
		}
	}
}

func TestBindingFlagsKeepsTheOptionsValues(t *testing.T) {
	o := differentOptions(t)
	before := o
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	o.AddGlobalFlags(fs)
	o.AddUpFlags(fs)
	if o != before {
		t.Errorf("binding flags changed the options: %+v, was %+v", o, before)
	}
}

// --flow-aggregator, the flag's earlier name, still turns flow visibility
// on, and is never passed on (its value goes as --flow-visibility).
func TestFlowAggregatorIsAnAliasOfFlowVisibility(t *testing.T) {
	if o := parse(t, []string{"--flow-aggregator"}); !o.FlowVisibility {
		t.Error("--flow-aggregator did not turn flow visibility on")
	}
	if o := parse(t, []string{"--flow-visibility"}); !o.FlowVisibility {
		t.Error("--flow-visibility did not turn flow visibility on")
	}
	o := DefaultOptions()
	o.FlowVisibility = true
	for _, a := range o.UpArgs() {
		if strings.HasPrefix(a, "--flow-aggregator") {
			t.Errorf("up args carry the alias: %q", a)
		}
	}
}
