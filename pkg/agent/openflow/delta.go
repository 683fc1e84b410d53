package openflow

import (
	"context"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// delta is one change of a feature's flows, the one way every feature
// writes (pods, Services, policy): computed first from the feature's record
// of what the switch holds and what is wanted, without changing anything;
// then applied to the record and written in one bundle with the other
// deltas of its batch; reverted when the switch refuses the bundle, so the
// record never disagrees with the switch and a retry starts from the truth.
type delta struct {
	// msgs take the switch from what the record says it holds to what is
	// wanted (empty: nothing to write).
	msgs []binding.Message
	// apply records the change in the feature's record and returns what
	// puts the record back (nil: the record does not change).
	apply func() (revert func())
}

// deltaBatch is the deltas written in one bundle. Each delta is applied to
// its record when it is added, so the next one of the batch is computed
// from the state the earlier ones leave (an endpoint one Service drops and
// the next takes keeps its flow).
type deltaBatch struct {
	msgs    []binding.Message
	reverts []func()
}

// add applies d to its record and queues its messages.
func (b *deltaBatch) add(d delta) {
	b.msgs = append(b.msgs, d.msgs...)
	if d.apply != nil {
		if r := d.apply(); r != nil {
			b.reverts = append(b.reverts, r)
		}
	}
}

// revert puts back, newest first, every record the batch changed.
func (b *deltaBatch) revert() {
	for i := len(b.reverts) - 1; i >= 0; i-- {
		b.reverts[i]()
	}
	b.reverts = nil
}

// commit writes the batch as one bundle; when the switch refuses it, every
// record the batch changed is put back. A batch without messages writes
// nothing.
func (b *deltaBatch) commit(ctx context.Context, w writer, what string) error {
	if err := w.write(ctx, what, b.msgs); err != nil {
		b.revert()
		return err
	}
	return nil
}

// writer writes messages in one bundle (the client's bridge).
type writer interface {
	write(ctx context.Context, what string, msgs []binding.Message) error
}

// recordEdit changes entries of one map and remembers their old values,
// so the change can be reverted: the apply half of most deltas.
type recordEdit[K comparable, V any] struct {
	m    map[K]V
	olds []recordOld[K, V]
}

type recordOld[K comparable, V any] struct {
	k   K
	v   V
	had bool
}

func editOf[K comparable, V any](m map[K]V) *recordEdit[K, V] { return &recordEdit[K, V]{m: m} }

// set makes m hold v at k.
func (e *recordEdit[K, V]) set(k K, v V) {
	old, had := e.m[k]
	e.olds = append(e.olds, recordOld[K, V]{k, old, had})
	e.m[k] = v
}

// del removes k from m.
func (e *recordEdit[K, V]) del(k K) {
	old, had := e.m[k]
	if !had {
		return
	}
	e.olds = append(e.olds, recordOld[K, V]{k, old, had})
	delete(e.m, k)
}

// revert puts back the old values, newest change first.
func (e *recordEdit[K, V]) revert() {
	for i := len(e.olds) - 1; i >= 0; i-- {
		o := e.olds[i]
		if o.had {
			e.m[o.k] = o.v
		} else {
			delete(e.m, o.k)
		}
	}
	e.olds = nil
}
