package storage

import "fmt"

// indexFunc appends the index values of an object to buf and returns it. The
// values it appends need not be unique.
type indexFunc func(obj any, buf []string) []string

// Indexers name the index functions of a store.
type Indexers map[string]indexFunc

// entry is a stored object and the resource version of its last change.
type entry struct {
	obj any
	rv  uint64
}

// keySet is the set of keys under one index value. Most values (a policy's
// own AppliedToGroup, a group's selector) index one object: that key is held
// inline, and a map is made only when a second key joins.
type keySet struct {
	one  string              // the only key while many is nil
	many map[string]struct{} // every key once a second one joined
}

// objectIndex maps each index value to the keys of the objects having it.
// values is nil until the index is first read: it is then built from the
// objects and kept up to date from there on, so that an index nobody reads
// costs nothing.
type objectIndex struct {
	fn     indexFunc
	values map[string]keySet
}

func (x *objectIndex) add(value, key string) {
	ks, ok := x.values[value]
	switch {
	case !ok:
		x.values[value] = keySet{one: key}
	case ks.many == nil:
		if ks.one == key {
			return
		}
		x.values[value] = keySet{many: map[string]struct{}{ks.one: {}, key: {}}}
	default:
		ks.many[key] = struct{}{}
	}
}

func (x *objectIndex) remove(value, key string) {
	ks, ok := x.values[value]
	switch {
	case !ok:
	case ks.many == nil:
		if ks.one == key {
			delete(x.values, value)
		}
	default:
		delete(ks.many, key)
		if len(ks.many) == 0 {
			delete(x.values, value)
		}
	}
}

// objects holds a store's objects by key with their indexes. It is not safe
// for concurrent use: the store guards it with its mutex.
type objects struct {
	items   map[string]entry
	indexes map[string]*objectIndex
	buf     []string // scratch space for index values
}

func newObjects(indexers Indexers) *objects {
	o := &objects{items: map[string]entry{}, indexes: make(map[string]*objectIndex, len(indexers))}
	for name, fn := range indexers {
		o.indexes[name] = &objectIndex{fn: fn}
	}
	return o
}

func (o *objects) get(key string) (entry, bool) {
	e, ok := o.items[key]
	return e, ok
}

// set stores obj under key at version rv, replacing and unindexing prev
// (nil when there was none).
func (o *objects) set(key string, prev, obj any, rv uint64) {
	for _, x := range o.indexes {
		if x.values == nil {
			continue
		}
		if prev != nil {
			o.buf = x.fn(prev, o.buf[:0])
			for _, v := range o.buf {
				x.remove(v, key)
			}
		}
		o.buf = x.fn(obj, o.buf[:0])
		for _, v := range o.buf {
			x.add(v, key)
		}
	}
	clear(o.buf)
	o.items[key] = entry{obj: obj, rv: rv}
}

// delete removes the object stored under key, prev.
func (o *objects) delete(key string, prev any) {
	for _, x := range o.indexes {
		if x.values == nil {
			continue
		}
		o.buf = x.fn(prev, o.buf[:0])
		for _, v := range o.buf {
			x.remove(v, key)
		}
	}
	clear(o.buf)
	delete(o.items, key)
}

func (o *objects) list() []any {
	l := make([]any, 0, len(o.items))
	for _, e := range o.items {
		l = append(l, e.obj)
	}
	return l
}

// byIndex returns the objects having value in the index name, building the
// index on its first use (so the caller must hold the store's write lock).
func (o *objects) byIndex(name, value string) ([]any, error) {
	x, ok := o.indexes[name]
	if !ok {
		return nil, fmt.Errorf("index with name %s does not exist", name)
	}
	if x.values == nil {
		x.values = make(map[string]keySet, len(o.items))
		for key, e := range o.items {
			o.buf = x.fn(e.obj, o.buf[:0])
			for _, v := range o.buf {
				x.add(v, key)
			}
		}
		clear(o.buf)
	}
	ks, ok := x.values[value]
	if !ok {
		return []any{}, nil
	}
	if ks.many == nil {
		return []any{o.items[ks.one].obj}, nil
	}
	l := make([]any, 0, len(ks.many))
	for k := range ks.many {
		l = append(l, o.items[k].obj)
	}
	return l, nil
}
