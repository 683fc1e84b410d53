package strict

import (
	"reflect"
	"sort"
)

// Keys lists the dotted keys of a config struct (its json tags), sections
// excluded, sorted: what a document of the file must describe.
func Keys(v any) []string {
	var keys []string
	var visit func(n *node, prefix string)
	visit = func(n *node, prefix string) {
		for name, c := range n.children {
			if c.kind == sectionNode {
				visit(c, join(prefix, name))
				continue
			}
			keys = append(keys, join(prefix, name))
		}
	}
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	visit(structNode(t, Spec{}), "")
	sort.Strings(keys)
	return keys
}
