// Package storage is the in-memory store behind the controlplane API: the
// controller writes its computed objects (pkg/controller/types) into it, and
// the API server lists and watches them. Each resource has an event
// generator that turns a change into what every watcher should see: a watcher
// for Node X (field selector nodeName=X) gets ADDED when X enters an object's
// span, DELETED when it leaves, nothing for changes that do not concern X, and
// for groups MODIFIED events carrying only the added/removed members.
//
// Contract for writers (the NetworkPolicy computation):
//   - Create/Update take *types.AddressGroup, *types.AppliedToGroup or
//     *types.NetworkPolicy (by store); Delete takes the object's Name.
//   - An object handed to Create or Update belongs to the store: never mutate
//     it (nor its span set or member sets) afterwards; build a new object
//     (a shallow copy with new sets is enough) and call Update with it. The
//     store diffs the previous and the new object to produce patches.
//   - Get, GetByIndex and List return the stored objects; treat them as
//     read-only.
package storage

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is a store of one controlplane resource.
type Interface interface {
	// Create adds a new object; it fails if the key exists.
	Create(obj any) error
	// Update replaces an existing object; it fails if the key is missing.
	Update(obj any) error
	// Delete removes the object with the key; it fails if the key is missing.
	Delete(key string) error
	// Get returns the object with the key.
	Get(key string) (any, bool, error)
	// GetByIndex returns the objects whose index value matches.
	GetByIndex(indexName, indexKey string) ([]any, error)
	// List returns every stored object.
	List() []any
	// ListObjects returns the controlplane objects a selector sees (for
	// nodeName=X, only objects whose span holds X, and for AppliedToGroups only
	// X's members) and the resource version of that snapshot.
	ListObjects(sel *Selectors) ([]runtime.Object, uint64)
	// GetObject returns the controlplane object with the key as a selector sees it.
	GetObject(key string, sel *Selectors) (runtime.Object, bool)
	// Watch streams the changes a selector sees. An empty or "0"
	// resourceVersion starts with an ADDED event per object; otherwise the
	// events after that version are replayed, or a 410 Gone error is returned
	// when they are no longer held.
	Watch(ctx context.Context, opts WatchOptions) (watch.Interface, error)
	// GetWatchersNum is the number of open watchers.
	GetWatchersNum() int
	// ResourceVersion is the version of the last change.
	ResourceVersion() uint64
}

// Selectors restrict what a reader sees.
type Selectors struct {
	// Key restricts to one object name; empty means all.
	Key string
	// Label is accepted for API compatibility; controlplane objects carry no labels.
	Label labels.Selector
	// Field may hold nodeName=X and metadata.name=Y.
	Field fields.Selector
}

// NodeName returns the node a selector asks for, if any.
func (s *Selectors) NodeName() (string, bool) {
	if s == nil || s.Field == nil {
		return "", false
	}
	return s.Field.RequiresExactMatch(NodeNameField)
}

func (s *Selectors) key() string {
	if s == nil {
		return ""
	}
	if s.Key != "" {
		return s.Key
	}
	if s.Field != nil {
		if name, ok := s.Field.RequiresExactMatch("metadata.name"); ok {
			return name
		}
	}
	return ""
}

// NodeNameField is the field selector label that selects a Node's slice.
const NodeNameField = "nodeName"

// WatchOptions are the parameters of Watch.
type WatchOptions struct {
	// ResourceVersion to start after; empty or "0" for a full initial state.
	ResourceVersion string
	// Selectors restrict the events.
	Selectors *Selectors
	// AllowBookmarks asks for BOOKMARK events carrying the latest version.
	AllowBookmarks bool
	// SendInitialEvents is the watch-list protocol of client-go informers
	// (sendInitialEvents=true): the current state as ADDED events whatever
	// ResourceVersion says, then a BOOKMARK annotated
	// k8s.io/initial-events-end=true, which tells the informer it has synced.
	SendInitialEvents bool
}
