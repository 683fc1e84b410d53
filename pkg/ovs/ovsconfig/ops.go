package ovsconfig

import (
	"context"
	"slices"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"
)

// Why operations and reads are built here instead of with libovsdb's model
// API (Create/Where/Mutate/List): in libovsdb v0.7.0 every such call reads
// TableCache.DatabaseModel() without the lock that TableCache.Purge holds
// when a reconnection resynchronises the cache, a data race the race
// detector reports as soon as ovsdb-server restarts under a live client.
// Operations in OVSDB's JSON notation (RFC 7047, section 5) and reads through
// the locked RowCache accessors avoid it.

// syncTimeout bounds the wait for a reconnection in progress before a read.
const syncTimeout = 2 * time.Second

// sync returns once no reconnection is in progress: libovsdb holds its
// connection lock for the whole reconnection, including the cache's purge
// and reload, and an echo needs that lock. With the server down it returns
// at once and readers see the last known state.
func (c *Connection) sync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	_ = c.ovs.Echo(ctx)
}

// cachedRows returns copies of the cached rows of table that match. The
// copies share maps and slices with the cache, which libovsdb replaces rather
// than mutates; callers must not modify them in place.
func cachedRows[T any](c *Connection, table string, match func(*T) bool) []*T {
	tc := c.ovs.Cache()
	if tc == nil {
		return nil
	}
	rc := tc.Table(table)
	if rc == nil {
		return nil
	}
	var out []*T
	for _, m := range rc.RowsShallow() {
		r, ok := m.(*T)
		if !ok || (match != nil && !match(r)) {
			continue
		}
		cp := *r
		out = append(out, &cp)
	}
	return out
}

// firstRow returns the first matching row or nil.
func firstRow[T any](c *Connection, table string, match func(*T) bool) *T {
	if rows := cachedRows(c, table, match); len(rows) > 0 {
		return rows[0]
	}
	return nil
}

func whereUUID(id string) []ovsdb.Condition {
	return []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: id}}}
}

// uuidSet is a set of row references; a name that is not a UUID refers to a
// row inserted by the same transaction (uuid-name).
func uuidSet(ids ...string) ovsdb.OvsSet {
	s := ovsdb.OvsSet{GoSet: make([]any, 0, len(ids))}
	for _, id := range ids {
		s.GoSet = append(s.GoSet, ovsdb.UUID{GoUUID: id})
	}
	return s
}

func stringSet(vals ...string) ovsdb.OvsSet {
	s := ovsdb.OvsSet{GoSet: make([]any, 0, len(vals))}
	for _, v := range vals {
		s.GoSet = append(s.GoSet, v)
	}
	return s
}

func stringMap(m map[string]string) ovsdb.OvsMap {
	om := ovsdb.OvsMap{GoMap: make(map[any]any, len(m))}
	for k, v := range m {
		om.GoMap[k] = v
	}
	return om
}

func opInsert(table, uuidName string, row ovsdb.Row) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationInsert, Table: table, UUIDName: uuidName, Row: row}
}

func opUpdate(table, id string, row ovsdb.Row) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: table, Where: whereUUID(id), Row: row}
}

func opDelete(table, id string) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationDelete, Table: table, Where: whereUUID(id)}
}

func opMutate(table, id string, mutations ...ovsdb.Mutation) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationMutate, Table: table, Where: whereUUID(id), Mutations: mutations}
}

// mergeKeysOps merges pairs into a map column on the server: delete the keys,
// then insert the pairs (an insert never overwrites an existing key).
func mergeKeysOps(table, id, column string, pairs map[string]string) ovsdb.Operation {
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return opMutate(table, id,
		ovsdb.Mutation{Column: column, Mutator: ovsdb.MutateOperationDelete, Value: stringSet(keys...)},
		ovsdb.Mutation{Column: column, Mutator: ovsdb.MutateOperationInsert, Value: stringMap(pairs)},
	)
}
