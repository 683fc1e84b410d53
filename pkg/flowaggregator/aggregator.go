package flowaggregator

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// Exporter takes the aggregator's complete records; Export must not block.
type Exporter interface {
	Export(fs []Flow)
}

// Aggregator turns the agents' records into complete ones: correlation,
// throughput, then the store and the exporters. Safe for concurrent use
// (the collector's peers call Ingest each from its goroutine).
type Aggregator struct {
	mu        sync.Mutex
	corr      Correlator
	last      map[key]time.Time
	inactive  time.Duration
	store     *Store
	exporters []Exporter
	metrics   *Metrics
	now       func() time.Time
}

// NewAggregator returns an aggregator that waits at most wait for a
// record's partner, remembers a connection's last record for its
// throughput inactive long, keeps records in store and hands them to
// exporters.
func NewAggregator(wait, inactive time.Duration, isPodIP func(netip.Addr) bool, store *Store, metrics *Metrics, exporters ...Exporter) *Aggregator {
	return &Aggregator{corr: Correlator{Wait: wait, IsPodIP: isPodIP}, last: map[key]time.Time{}, inactive: inactive,
		store: store, exporters: exporters, metrics: metrics, now: time.Now}
}

// Ingest takes the decoded records of one message.
func (a *Aggregator) Ingest(_ string, recs []ipfix.Record) {
	now := a.now()
	var out []Flow
	a.mu.Lock()
	for _, r := range recs {
		f, ok := fromRecord(r, now)
		if !ok {
			a.metrics.DecodeErrors.WithLabelValues("record").Inc()
			continue
		}
		out = append(out, a.corr.Add(f, now)...)
	}
	out = a.finishLocked(out)
	a.mu.Unlock()
	a.publish(out)
}

// Expire releases the records whose partner did not come in time; Run
// calls it every second.
func (a *Aggregator) Expire() {
	now := a.now()
	a.mu.Lock()
	out := a.finishLocked(a.corr.Expire(now))
	for k, t := range a.last {
		if now.Sub(t) > a.inactive {
			delete(a.last, k)
		}
	}
	a.mu.Unlock()
	a.publish(out)
}

// finishLocked computes the throughput of released records and updates the
// metrics.
func (a *Aggregator) finishLocked(fs []Flow) []Flow {
	for i := range fs {
		f := &fs[i]
		c := f.counts()
		k := f.key()
		since := f.Start
		if prev, ok := a.last[k]; ok && prev.Before(f.End) {
			since = prev
		}
		secs := uint64(f.End.Sub(since) / time.Second)
		if secs == 0 {
			secs = 1
		}
		f.Throughput, f.ReverseThroughput = c.Delta.Bytes/secs, c.ReverseDelta.Bytes/secs
		a.last[k] = f.End
	}
	a.metrics.Correlated.Add(float64(a.corr.Correlated))
	a.metrics.ReleasedAlone.Add(float64(a.corr.Alone))
	a.corr.Correlated, a.corr.Alone = 0, 0
	a.metrics.PendingRecords.Set(float64(a.corr.Pending()))
	return fs
}

func (a *Aggregator) publish(fs []Flow) {
	if len(fs) == 0 {
		return
	}
	a.store.Add(fs...)
	a.metrics.StoredRecords.Set(float64(a.store.Len()))
	for _, e := range a.exporters {
		e.Export(fs)
	}
}

// runExpiry calls Expire every second until ctx ends.
func (a *Aggregator) runExpiry(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Expire()
		}
	}
}
