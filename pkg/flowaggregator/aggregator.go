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
//
// Every complete record is output as soon as it is complete. A connection
// whose agents send nothing for the active timeout (upstream's
// activeFlowRecordTimeout: an idle connection the agents reported once, or
// agents whose own active timeout is longer) is output again then: its last
// record with flowEndReason active timeout, flowEnd now, deltas and
// throughput 0, so that a live connection shows at the output at least every
// active timeout. A connection is forgotten, and no longer output, once its
// end of flow was output (or, for a denied connection, at once: its agent
// stops reporting it when its packets stop) or once no agent record came for
// the inactive timeout (inactiveFlowRecordTimeout).
type Aggregator struct {
	mu        sync.Mutex
	corr      Correlator
	live      map[key]*liveFlow
	active    time.Duration
	inactive  time.Duration
	store     *Store
	exporters []Exporter
	metrics   *Metrics
	now       func() time.Time
}

// liveFlow is what the aggregator keeps of a connection it output.
type liveFlow struct {
	// last is its last record output from the agents' records.
	last Flow
	// end is that record's flowEnd (the throughput's start for the next).
	end time.Time
	// in is when the last of its records came (complete), out when it
	// was last output (on the aggregator's clock).
	in, out time.Time
	// repeat: the connection is output again each active timeout.
	repeat bool
}

// NewAggregator returns an aggregator that waits at most wait for a
// record's partner, outputs a live connection at least every active,
// forgets a connection of which no record came for inactive, keeps
// records in store and hands them to exporters.
func NewAggregator(wait, active, inactive time.Duration, isPodIP func(netip.Addr) bool, store *Store, metrics *Metrics, exporters ...Exporter) *Aggregator {
	return &Aggregator{corr: Correlator{Wait: wait, IsPodIP: isPodIP}, live: map[key]*liveFlow{}, active: active, inactive: inactive,
		store: store, exporters: exporters, metrics: metrics, now: time.Now}
}

// Ingest takes the decoded records of one IPFIX message.
func (a *Aggregator) Ingest(_ string, recs []ipfix.Record) {
	now := a.now()
	fs := make([]Flow, 0, len(recs))
	for _, r := range recs {
		f, ok := fromRecord(r, now)
		if !ok {
			a.metrics.DecodeErrors.WithLabelValues("record").Inc()
			continue
		}
		fs = append(fs, f)
	}
	a.IngestFlows(fs, now)
}

// IngestFlows takes the agents' records received at now (decoded from
// IPFIX or gRPC).
func (a *Aggregator) IngestFlows(fs []Flow, now time.Time) {
	var out []Flow
	a.mu.Lock()
	for _, f := range fs {
		out = append(out, a.corr.Add(f, now)...)
	}
	out = a.finishLocked(out, now)
	a.mu.Unlock()
	a.publish(out)
}

// Expire releases the records whose partner did not come in time, outputs
// again the live connections not output for the active timeout, and forgets
// those of which no record came for the inactive timeout; Run calls it every
// second.
func (a *Aggregator) Expire() {
	now := a.now()
	a.mu.Lock()
	out := a.finishLocked(a.corr.Expire(now), now)
	for k, l := range a.live {
		switch {
		case now.Sub(l.in) > a.inactive:
			delete(a.live, k)
		case l.repeat && now.Sub(l.out) >= a.active:
			out = append(out, l.again(now))
			l.out = now
		}
	}
	a.metrics.LiveConnections.Set(float64(len(a.live)))
	a.mu.Unlock()
	a.publish(out)
}

// again is the connection's last record output anew at now: flowEnd now,
// reason active timeout, no delta, no throughput (the agents reported no
// bytes since).
func (l *liveFlow) again(now time.Time) Flow {
	f := l.last
	f.End = now.UTC().Truncate(time.Second)
	f.EndReason = ipfix.EndReasonActiveTimeout
	f.Throughput, f.ReverseThroughput = 0, 0
	f.Received = now
	still := func(c *NodeCounts) *NodeCounts {
		if c == nil {
			return nil
		}
		n := *c
		n.Delta, n.ReverseDelta = Counts{}, Counts{}
		return &n
	}
	f.FromSource, f.FromDestination = still(f.FromSource), still(f.FromDestination)
	return f
}

// finishLocked computes the throughput of released records, records them
// as the live connections' last, and updates the metrics.
func (a *Aggregator) finishLocked(fs []Flow, now time.Time) []Flow {
	for i := range fs {
		f := &fs[i]
		c := f.counts()
		k := f.key()
		since := f.Start
		l := a.live[k]
		if l != nil && l.end.Before(f.End) {
			since = l.end
		}
		secs := uint64(f.End.Sub(since) / time.Second)
		if secs == 0 {
			secs = 1
		}
		f.Throughput, f.ReverseThroughput = c.Delta.Bytes/secs, c.ReverseDelta.Bytes/secs
		if l == nil {
			l = &liveFlow{}
			a.live[k] = l
		}
		l.last, l.end, l.in, l.out = *f, f.End, now, now
		l.repeat = f.EndReason != ipfix.EndReasonEndOfFlow && !f.Denied
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
