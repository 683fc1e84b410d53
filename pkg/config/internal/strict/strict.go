// Package strict decodes a YAML config file into a Go struct strictly:
// every key must be known, every value must have its key's type, and every
// problem is reported with the file and the dotted key it concerns, a typo
// with the closest known key. Upstream Antrea's keys and feature gates that
// this Antrea does not implement can be declared: they are accepted at
// upstream's default value, so that a file written for upstream loads, and
// refused at any other ("not supported by this Antrea").
//
// The struct's json tags name the keys (the YAML is turned into the JSON
// data model first). The YAML is read as YAML 1.2 (yes, no, on
// and off are strings, not booleans), and a key given twice is an error. The
// struct passed in holds the defaults: a key that is omitted, null or an
// empty list leaves its field as it is.
package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	namesuggest "antrea.io/antrea/pkg/util/suggest"
)

// Unsupported is an upstream key this Antrea does not implement.
type Unsupported struct {
	// Key is the dotted path, e.g. "antreaProxy.serviceProxyName"; a last
	// element "*" stands for every other key of its section.
	Key string
	// Accept are the values accepted besides an empty one (omitted, null,
	// an empty list or mapping): upstream's default and its equivalents.
	// Values are bool, string or int.
	Accept []any
	// AnyValue accepts every value: the key has no effect while the feature
	// it belongs to is off, which its own key (e.g. flowExporter.enable)
	// ensures.
	AnyValue bool
	// Why completes "not supported by this Antrea", e.g. "FlowExporter is
	// not implemented".
	Why string
}

// Gate is one of upstream's feature gates.
type Gate struct {
	Name string
	// Default is upstream's default (as its chart writes the file).
	Default bool
	// Implemented gates are decoded into the gates map; the others are
	// accepted when false or at their default, and dropped.
	Implemented bool
}

// Spec says what a file may hold beyond the struct's own keys.
type Spec struct {
	Unsupported []Unsupported
	// GatesKey is the key of the map of feature gates ("featureGates"),
	// whose entries are checked against Gates.
	GatesKey string
	Gates    []Gate
}

// Decode decodes the YAML data of file into out (a pointer to a struct that
// holds the defaults). The error lists every problem found, one per line,
// each starting with file and the key.
func Decode(file string, data []byte, out any, spec Spec) error {
	return WithFile(file, decode(data, out, spec))
}

// Load reads the conf file at path strictly over out (which holds the
// defaults), then checks the values with validate; both kinds of error name
// the file. It is what every component's Load does.
func Load(path string, out any, spec Spec, validate func() []error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return Parse(path, data, out, spec, validate)
}

// Parse is Load for data read from file (named in errors).
func Parse(file string, data []byte, out any, spec Spec, validate func() []error) error {
	if err := Decode(file, data, out, spec); err != nil {
		return err
	}
	return WithFile(file, validate())
}

// WithFile prefixes each error with the file name and joins them.
func WithFile(file string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = fmt.Errorf("%s: %w", file, err)
	}
	return errors.Join(out...)
}

func decode(data []byte, out any, spec Spec) []error {
	root, err := newSchema(reflect.TypeOf(out), spec)
	if err != nil {
		return []error{err}
	}
	doc, err := parseYAML(data)
	if err != nil {
		return []error{err}
	}
	if doc == nil {
		return nil // empty, or only comments: the defaults
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("want a mapping of keys at the top level, got %s", describe(doc))}
	}
	orig := deepCopy(m).(map[string]any)
	w := walker{root: root, spec: spec}
	w.section(m, root, "")
	if len(w.errs) > 0 {
		return w.errs
	}
	pruned, err := json.Marshal(m)
	if err != nil {
		return []error{err}
	}
	dec := json.NewDecoder(bytes.NewReader(pruned))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return []error{typeError(err, orig)}
	}
	return nil
}

// parseYAML reads one YAML document into the JSON data model: mappings with
// string keys, lists, strings, bools, json.Number and nil.
func parseYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("not valid YAML: %s", strings.Join(te.Errors, "; "))
		}
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid YAML: want a single document")
	}
	return toJSONModel(doc, "")
}

func toJSONModel(v any, path string) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%s: %v is not a number a config can hold", path, x)
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			c, err := toJSONModel(e, join(path, k))
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%s: key %v is not a string", orTop(path), k)
			}
			c, err := toJSONModel(e, join(path, ks))
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			c, err := toJSONModel(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			s[i] = c
		}
		return s, nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	default:
		return fmt.Sprint(x), nil
	}
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

type nodeKind int

const (
	sectionNode     nodeKind = iota // a mapping of keys
	leafNode                        // a value of the struct
	gatesNode                       // the feature gates map
	unsupportedNode                 // an upstream key we do not implement
)

type node struct {
	kind     nodeKind
	children map[string]*node
	// backed sections exist in the struct; the others hold only
	// unsupported keys and are dropped before the struct is decoded.
	backed      bool
	unsupported *Unsupported
	// wildcard covers the keys of a section not named in children.
	wildcard *Unsupported
}

func newSchema(t reflect.Type, spec Spec) (*node, error) {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("strict: want a pointer to a struct, got %s", t)
	}
	root := structNode(t.Elem(), spec)
	for i := range spec.Unsupported {
		u := &spec.Unsupported[i]
		parts := strings.Split(u.Key, ".")
		n := root
		for _, p := range parts[:len(parts)-1] {
			c, ok := n.children[p]
			if !ok {
				c = &node{kind: sectionNode, children: map[string]*node{}}
				n.children[p] = c
			}
			if c.kind != sectionNode {
				return nil, fmt.Errorf("strict: unsupported key %s: %s is not a section", u.Key, p)
			}
			n = c
		}
		last := parts[len(parts)-1]
		if last == "*" {
			n.wildcard = u
			continue
		}
		if _, dup := n.children[last]; dup {
			return nil, fmt.Errorf("strict: unsupported key %s is already a key", u.Key)
		}
		n.children[last] = &node{kind: unsupportedNode, unsupported: u}
	}
	return root, nil
}

func structNode(t reflect.Type, spec Spec) *node {
	n := &node{kind: sectionNode, backed: true, children: map[string]*node{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			n.children[name] = structNode(ft, spec)
		case ft.Kind() == reflect.Map && name == spec.GatesKey:
			n.children[name] = &node{kind: gatesNode}
		default:
			n.children[name] = &node{kind: leafNode}
		}
	}
	return n
}

type walker struct {
	root *node
	spec Spec
	errs []error
}

func (w *walker) fail(format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf(format, args...))
}

// section checks the keys of m against n and removes from m what must not
// reach the struct: empty values (they mean the default), unsupported keys,
// unbacked sections and unimplemented gates.
func (w *walker) section(m map[string]any, n *node, prefix string) {
	for _, k := range sortedKeys(m) {
		v := m[k]
		path := join(prefix, k)
		c, ok := n.children[k]
		if !ok && n.wildcard != nil {
			c, ok = &node{kind: unsupportedNode, unsupported: n.wildcard}, true
		}
		if !ok {
			w.fail("unknown key %q%s", path, w.suggestKey(k, n, prefix))
			continue
		}
		if isEmpty(v) {
			delete(m, k)
			continue
		}
		switch c.kind {
		case sectionNode:
			sub, ok := v.(map[string]any)
			if !ok {
				w.fail("%s: want a mapping of keys, got %s", path, describe(v))
				continue
			}
			w.section(sub, c, path)
			if !c.backed {
				delete(m, k)
			}
		case gatesNode:
			sub, ok := v.(map[string]any)
			if !ok {
				w.fail("%s: want a mapping of feature gate names to true or false, got %s", path, describe(v))
				continue
			}
			w.gates(sub, path)
			if len(sub) == 0 {
				delete(m, k) // only unimplemented gates: the defaults stay
			}
		case unsupportedNode:
			w.unsupported(c.unsupported, path, v)
			delete(m, k)
		}
	}
}

func (w *walker) gates(m map[string]any, path string) {
	names := make([]string, len(w.spec.Gates))
	for i, g := range w.spec.Gates {
		names[i] = g.Name
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		i := slices.IndexFunc(w.spec.Gates, func(g Gate) bool { return g.Name == k })
		if i < 0 {
			w.fail("%s: unknown feature gate %q%s", path, k, suggest(k, names))
			continue
		}
		if isEmpty(v) {
			delete(m, k)
			continue
		}
		on, ok := v.(bool)
		if !ok {
			w.fail("%s.%s: want true or false, got %s", path, k, describe(v))
			continue
		}
		g := w.spec.Gates[i]
		if g.Implemented {
			continue
		}
		if on && !g.Default {
			w.fail("%s.%s: true is not supported by this Antrea (the feature is not implemented; upstream's default is false)", path, k)
		}
		delete(m, k)
	}
}

func (w *walker) unsupported(u *Unsupported, path string, v any) {
	if u.AnyValue {
		return
	}
	for _, a := range u.Accept {
		if sameValue(v, a) {
			return
		}
	}
	var want string
	switch len(u.Accept) {
	case 0:
		want = "only an empty value"
	case 1:
		want = "only " + format(u.Accept[0]) + ", upstream's default"
	default:
		parts := make([]string, len(u.Accept))
		for i, a := range u.Accept {
			parts[i] = format(a)
		}
		want = "only " + strings.Join(parts, " or ")
	}
	why := ""
	if u.Why != "" {
		why = u.Why + "; "
	}
	w.fail("%s: %s is not supported by this Antrea (%s%s)", path, format(v), why, want)
}

// suggestKey proposes the closest key of the same section or, failing
// that, a key elsewhere with that very name (a key put in the wrong section).
func (w *walker) suggestKey(k string, n *node, prefix string) string {
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	if s := closest(k, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", join(prefix, s))
	}
	var elsewhere []string
	var visit func(n *node, prefix string)
	visit = func(n *node, prefix string) {
		for name, c := range n.children {
			p := join(prefix, name)
			if strings.EqualFold(name, k) {
				elsewhere = append(elsewhere, p)
			}
			if c.kind == sectionNode {
				visit(c, p)
			}
		}
	}
	visit(w.root, "")
	if len(elsewhere) > 0 {
		sort.Strings(elsewhere)
		return fmt.Sprintf(" (did you mean %q?)", elsewhere[0])
	}
	return ""
}

func suggest(k string, names []string) string {
	if s := closest(k, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// closest returns the name nearest to k (ignoring case), or "" when none is
// near enough to be a typo of it.
func closest(k string, names []string) string { return namesuggest.Closest(k, names, 4) }

// typeError names the key and the value a json decoding error is about.
func typeError(err error, doc map[string]any) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return err
	}
	got := te.Value
	if v, ok := lookup(doc, te.Field); ok {
		got = format(v)
	}
	return fmt.Errorf("%s: want %s, got %s", te.Field, wantOf(te.Type), got)
}

func wantOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(wantOf(t.Elem()), "a "), "an ") + "s"
	default:
		return "a mapping of keys"
	}
}

func lookup(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return format(v)
	}
}

// format prints a value as it would be written in the file (strings quoted).
func format(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// sameValue compares a decoded value with an accepted one (bool, string or int).
func sameValue(v, want any) bool {
	switch w := want.(type) {
	case int:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, err := n.Int64()
		return err == nil && i == int64(w)
	default:
		return v == want
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}
