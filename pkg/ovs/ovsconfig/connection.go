package ovsconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"
)

const (
	// reconnectInterval is how often a lost connection is retried. A constant
	// back-off never gives up: libovsdb panics when its back-off stops.
	reconnectInterval = 200 * time.Millisecond
	// pollInterval is how often waitFor polls a condition.
	pollInterval = 20 * time.Millisecond
	// cacheResyncInterval is how often waitCache re-checks without an event.
	cacheResyncInterval = 100 * time.Millisecond
)

// Connection is a monitored connection to one ovsdb-server. Several
// OVSBridge values (br-int, br-phy) share one Connection.
type Connection struct {
	endpoint string
	ovs      client.Client

	// changed is closed (and replaced) whenever the monitored cache changes,
	// waking waitCache callers without polling.
	mu      sync.Mutex
	changed chan struct{}
}

// Connect opens a connection to the ovsdb-server at endpoint ("unix:PATH" or
// "tcp:HOST:PORT"), monitors the Open_vSwitch, Bridge, Port and Interface
// tables, and keeps reconnecting when the server goes away until Close.
func Connect(ctx context.Context, endpoint string) (*Connection, error) {
	dbModel, err := newClientDBModel()
	if err != nil {
		return nil, err
	}
	// libovsdb logs to stderr by default; our own structured logs say what
	// matters. OVSCONFIG_DEBUG=1 shows libovsdb's messages (cache updates,
	// transactions) when a monitor misbehaves.
	libLog := logr.Discard()
	if os.Getenv("OVSCONFIG_DEBUG") != "" {
		libLog = stdr.New(log.New(os.Stderr, "libovsdb ", 0))
		stdr.SetVerbosity(5)
	}
	ovs, err := client.NewOVSDBClient(dbModel,
		client.WithEndpoint(endpoint),
		client.WithLogger(&libLog),
		client.WithReconnect(5*time.Second, backoff.NewConstantBackOff(reconnectInterval)),
	)
	if err != nil {
		return nil, fmt.Errorf("OVSDB client for %s: %w", endpoint, err)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := ovs.Connect(ctx); err != nil {
		return nil, fmt.Errorf("connect to ovsdb-server at %s: %w", endpoint, err)
	}
	c := &Connection{endpoint: endpoint, ovs: ovs, changed: make(chan struct{})}
	// The cache outlives reconnections in libovsdb v0.7.0, so the handler is
	// registered once.
	notify := func(string, model.Model) { c.notify() }
	ovs.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(table string, _, m model.Model) { c.notify() },
		DeleteFunc: notify,
	})
	// Columns are listed: a monitor without them asks for every column of the
	// schema, and libovsdb then drops whole updates (ofport included) that
	// carry a column our models do not have.
	var tables []client.MonitorOption
	for _, m := range []model.Model{&ovsRow{}, &bridgeRow{}, &portRow{}, &interfaceRow{}} {
		tables = append(tables, client.WithTable(m, modelColumns(m)...))
	}
	if _, err := ovs.Monitor(ctx, ovs.NewMonitor(tables...)); err != nil {
		ovs.Close()
		return nil, fmt.Errorf("monitor ovsdb-server at %s: %w", endpoint, err)
	}
	klog.V(2).InfoS("Connected to ovsdb-server", "endpoint", endpoint)
	return c, nil
}

// notify wakes every waitCache caller.
func (c *Connection) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.changed)
	c.changed = make(chan struct{})
}

// changes returns a channel closed at the next cache change.
func (c *Connection) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// waitCache waits until cond holds on the monitored cache or ctx ends: it is
// how a caller reads its own write (the monitor update arrives after the
// transaction's reply) and how it waits for ovs-vswitchd to fill a column.
// Cache events wake it; a slow tick covers an event libovsdb dropped.
func (c *Connection) waitCache(ctx context.Context, cond func() (bool, error)) error {
	ticker := time.NewTicker(cacheResyncInterval)
	defer ticker.Stop()
	for {
		// Take the channel before checking, so a change in between still wakes us.
		wake := c.changes()
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-ticker.C:
		}
	}
}

// Endpoint is the ovsdb-server address this connection uses.
func (c *Connection) Endpoint() string { return c.endpoint }

// Connected says whether ovsdb-server answers an echo on this connection
// within a second (libovsdb's own Connected stays true while it reconnects).
func (c *Connection) Connected() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.ovs.Echo(ctx) == nil
}

// Close disconnects; the connection does not reconnect afterwards.
func (c *Connection) Close() {
	alive := c.Connected()
	c.ovs.Close()
	if alive {
		return
	}
	// libovsdb v0.7.0 stops its reconnect loop only when Close finds a live
	// connection; closed during an outage, it would reconnect later and stay
	// connected. Close that connection as soon as it appears. (If the server
	// never comes back, this goroutine, like libovsdb's loop, keeps waiting.)
	go func() {
		for !c.ovs.Connected() {
			time.Sleep(reconnectInterval)
		}
		c.ovs.Close()
	}()
}

// GetOVSVersion returns ovs_version from the Open_vSwitch table.
func (c *Connection) GetOVSVersion(ctx context.Context) (string, error) {
	c.sync(ctx)
	root, err := c.root()
	if err != nil {
		return "", err
	}
	if root.OVSVersion == nil || *root.OVSVersion == "" {
		return "", fmt.Errorf("Open_vSwitch table: ovs_version is not set (ovs-ctl writes it when it starts OVS): %w", ErrNotFound)
	}
	return *root.OVSVersion, nil
}

// root returns the single row of the Open_vSwitch table.
func (c *Connection) root() (*ovsRow, error) {
	rows := cachedRows[ovsRow](c, tableOpenVSwitch, nil)
	if len(rows) != 1 {
		return nil, fmt.Errorf("Open_vSwitch table has %d rows, want 1 (run ovs-vsctl init): %w", len(rows), ErrNotFound)
	}
	return rows[0], nil
}

// withDefaultTimeout bounds ctx by DefaultTimeout unless it already has a deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// isConnectionError says whether err means the transaction may not have
// reached ovsdb-server, or its answer was lost, because the connection broke.
func (c *Connection) isConnectionError(err error) bool {
	if errors.Is(err, client.ErrNotConnected) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	// rpc2 reports a closed connection with its own error values; whatever the
	// value, a broken connection is what matters.
	return !c.ovs.Connected()
}

// do runs attempt until it succeeds, fails for a reason other than a broken
// connection, or ctx (bounded by DefaultTimeout) ends. retry tells attempt
// that an earlier try may have been applied without us hearing the answer, so
// it must check the database before writing again: that is what keeps a write
// during an ovsdb-server restart from being lost or applied twice.
func (c *Connection) do(ctx context.Context, what string, attempt func(ctx context.Context, retry bool) error) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for retry := false; ; retry = true {
		// Each attempt reads the cache; let a reconnection in progress finish
		// reloading it first.
		c.sync(ctx)
		err := attempt(ctx, retry)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !c.isConnectionError(err) {
			return err
		}
		klog.InfoS("OVSDB connection lost, retrying once reconnected", "operation", what, "endpoint", c.endpoint, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: ovsdb-server at %s did not come back: %w (last error: %v)", what, c.endpoint, ctx.Err(), err)
		case <-time.After(reconnectInterval):
		}
	}
}

// transact sends ops in one transaction and turns failed operations into one
// error prefixed with what.
func (c *Connection) transact(ctx context.Context, what string, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	results, err := c.ovs.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("%s: transaction: %w", what, err)
	}
	opErrs, err := ovsdb.CheckOperationResults(results, ops)
	if err != nil {
		if len(opErrs) > 0 {
			errs := make([]error, 0, len(opErrs))
			for _, e := range opErrs {
				errs = append(errs, e)
			}
			return nil, fmt.Errorf("%s: %w", what, errors.Join(errs...))
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return results, nil
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// modelColumns returns pointers to the fields of model m (a pointer to one of
// our row structs) that map to columns other than _uuid, as libovsdb's
// WithTable wants them.
func modelColumns(m model.Model) []any {
	v := reflect.ValueOf(m).Elem()
	var fields []any
	for i := 0; i < v.NumField(); i++ {
		if col := v.Type().Field(i).Tag.Get("ovsdb"); col != "" && col != "_uuid" {
			fields = append(fields, v.Field(i).Addr().Interface())
		}
	}
	return fields
}

// GetExternalIDs returns the external_ids of the Open_vSwitch table's row:
// node-wide facts that must outlive any one bridge.
func (c *Connection) GetExternalIDs(ctx context.Context) (map[string]string, error) {
	c.sync(ctx)
	root, err := c.root()
	if err != nil {
		return nil, err
	}
	out := maps.Clone(root.ExternalIDs)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// SetExternalIDs merges keys into the Open_vSwitch row's external_ids; the
// server does the merge (delete the keys, insert the pairs, one transaction).
func (c *Connection) SetExternalIDs(ctx context.Context, externalIDs map[string]string) error {
	if len(externalIDs) == 0 {
		return nil
	}
	what := "set external_ids of the Open_vSwitch table"
	return c.do(ctx, what, func(ctx context.Context, retry bool) error {
		root, err := c.root()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		ops := []ovsdb.Operation{mergeKeysOps(tableOpenVSwitch, root.UUID, "external_ids", externalIDs)}
		if _, err := c.transact(ctx, what, ops); err != nil {
			return err
		}
		return c.waitCache(ctx, func() (bool, error) {
			root, err := c.root()
			if err != nil {
				return false, err
			}
			return hasPairs(root.ExternalIDs, externalIDs), nil
		})
	})
}

// hasPairs says whether m holds every pair of want.
func hasPairs(m, want map[string]string) bool {
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}
