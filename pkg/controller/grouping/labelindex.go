package grouping

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// set is a small generic set; the index keeps pointers in it.
type set[T comparable] map[T]struct{}

func (s set[T]) has(v T) bool { _, ok := s[v]; return ok }

// indexItem is an item of an itemIndex: it knows its place in the index's
// slice of all items (an item is in one index at most).
type indexItem interface {
	comparable
	allPos() *int
}

// itemIndex indexes items (Pods or Namespaces) by label key and value so that
// a selector with an equality, "in" or "exists" requirement visits only the
// items carrying that label instead of all of them.
type itemIndex[T indexItem] struct {
	// all holds every item once, in no particular order; an item's allPos
	// is its place, so that removing it is a swap with the last one. (A
	// set per Namespace grew through every size up to its Pod count.)
	all  []T
	byKV map[string]map[string]set[T]
}

func newItemIndex[T indexItem]() *itemIndex[T] {
	return &itemIndex[T]{byKV: map[string]map[string]set[T]{}}
}

// has tells whether item is in x.all.
func (x *itemIndex[T]) has(item T) bool {
	p := *item.allPos()
	return p >= 0 && p < len(x.all) && x.all[p] == item
}

func (x *itemIndex[T]) add(item T, lbls map[string]string) {
	if !x.has(item) {
		*item.allPos() = len(x.all)
		x.all = append(x.all, item)
	}
	for k, v := range lbls {
		values := x.byKV[k]
		if values == nil {
			values = map[string]set[T]{}
			x.byKV[k] = values
		}
		items := values[v]
		if items == nil {
			items = set[T]{}
			values[v] = items
		}
		items[item] = struct{}{}
	}
}

func (x *itemIndex[T]) remove(item T, lbls map[string]string) {
	if x.has(item) {
		p, last := *item.allPos(), len(x.all)-1
		x.all[p] = x.all[last]
		*x.all[p].allPos() = p
		var zero T
		x.all[last] = zero
		x.all = x.all[:last]
	}
	for k, v := range lbls {
		values := x.byKV[k]
		items := values[v]
		delete(items, item)
		if len(items) == 0 {
			delete(values, v)
			if len(values) == 0 {
				delete(x.byKV, k)
			}
		}
	}
}

// matching calls visit for every item whose labels (given by labelsOf) match
// sel. It walks the smallest candidate set any single requirement allows.
func (x *itemIndex[T]) matching(sel labels.Selector, labelsOf func(T) labels.Set, visit func(T)) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return
	}
	var best []set[T]
	bestSize := len(x.all)
	for i := range reqs {
		r := &reqs[i]
		var cands []set[T]
		size := 0
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			for _, v := range r.ValuesUnsorted() {
				if items := x.byKV[r.Key()][v]; len(items) > 0 {
					cands = append(cands, items)
					size += len(items)
				}
			}
		case selection.Exists:
			for _, items := range x.byKV[r.Key()] {
				cands = append(cands, items)
				size += len(items)
			}
		default:
			continue
		}
		if size < bestSize || best == nil && size <= bestSize {
			best, bestSize = cands, size
			if size == 0 {
				return
			}
		}
	}
	if best == nil {
		for _, item := range x.all {
			if sel.Matches(labelsOf(item)) {
				visit(item)
			}
		}
		return
	}
	for _, items := range best {
		for item := range items {
			if sel.Matches(labelsOf(item)) {
				visit(item)
			}
		}
	}
}

// selectorIndex indexes selectors (groups) so that, given the labels of one
// item, only selectors that could match those labels are visited. Each
// selector is filed once: under one key=value of an equality/"in"
// requirement, else under the key of an "exists" requirement, else as a
// wildcard that every item must check.
type selectorIndex[G comparable] struct {
	byKV     map[string]map[string]set[G]
	byKey    map[string]set[G]
	wildcard set[G]
	size     int
}

func newSelectorIndex[G comparable]() *selectorIndex[G] {
	return &selectorIndex[G]{byKV: map[string]map[string]set[G]{}, byKey: map[string]set[G]{}, wildcard: set[G]{}}
}

// slot picks where a selector is filed: the equality/"in" requirement with
// the fewest values, else the first "exists" requirement, else none.
func slot(sel labels.Selector) (key string, values []string, byKey bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		// Matches nothing: as a wildcard it is evaluated, and rejected, for
		// every item. NewSelector never builds one, so the cost is moot.
		return "", nil, false
	}
	bestValues := -1
	for i := range reqs {
		r := &reqs[i]
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vals := r.ValuesUnsorted()
			if bestValues < 0 || len(vals) < bestValues {
				key, values, bestValues = r.Key(), vals, len(vals)
			}
		}
	}
	if bestValues >= 0 {
		return key, values, false
	}
	for i := range reqs {
		if reqs[i].Operator() == selection.Exists {
			return reqs[i].Key(), nil, true
		}
	}
	return "", nil, false
}

func (x *selectorIndex[G]) add(g G, sel labels.Selector) {
	x.size++
	key, values, byKey := slot(sel)
	switch {
	case byKey:
		s := x.byKey[key]
		if s == nil {
			s = set[G]{}
			x.byKey[key] = s
		}
		s[g] = struct{}{}
	case values != nil:
		m := x.byKV[key]
		if m == nil {
			m = map[string]set[G]{}
			x.byKV[key] = m
		}
		for _, v := range values {
			s := m[v]
			if s == nil {
				s = set[G]{}
				m[v] = s
			}
			s[g] = struct{}{}
		}
	default:
		x.wildcard[g] = struct{}{}
	}
}

func (x *selectorIndex[G]) remove(g G, sel labels.Selector) {
	x.size--
	key, values, byKey := slot(sel)
	switch {
	case byKey:
		delete(x.byKey[key], g)
		if len(x.byKey[key]) == 0 {
			delete(x.byKey, key)
		}
	case values != nil:
		m := x.byKV[key]
		for _, v := range values {
			delete(m[v], g)
			if len(m[v]) == 0 {
				delete(m, v)
			}
		}
		if len(m) == 0 {
			delete(x.byKV, key)
		}
	default:
		delete(x.wildcard, g)
	}
}

// candidates calls visit for every selector that could match lbls. A selector
// is visited at most once per call; callers still evaluate it.
func (x *selectorIndex[G]) candidates(lbls map[string]string, visit func(G)) {
	if x.size == 0 {
		return
	}
	for g := range x.wildcard {
		visit(g)
	}
	for k, v := range lbls {
		for g := range x.byKey[k] {
			visit(g)
		}
		// An "in" selector is filed under several values of one key; an item
		// has one value per key, so it still reaches the selector only once.
		for g := range x.byKV[k][v] {
			visit(g)
		}
	}
}
