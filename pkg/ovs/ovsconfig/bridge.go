package ovsconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"
)

// ErrAlreadyExists is wrapped by errors about creating a port whose name is taken.
var ErrAlreadyExists = errors.New("already exists")

// bridgeProtocols are the OpenFlow versions the agent speaks: 1.5 for bundles
// and packet-out matching, 1.3 for ovs-ofctl users' habits.
func bridgeProtocols() []string { return []string{"OpenFlow13", "OpenFlow15"} }

// isKnownInterfaceType says whether this client creates interfaces of type t;
// anything else is refused before it reaches ovs-vswitchd, which would only
// report it later in the interface's error column.
func isKnownInterfaceType(t string) bool {
	switch t {
	case InterfaceTypeSystem, "system", InterfaceTypeInternal, "tap",
		InterfaceTypeGeneve, InterfaceTypeVXLAN, InterfaceTypeGRE, InterfaceTypeERSPAN, "stt", InterfaceTypePatch:
		return true
	}
	return false
}

// maxIfNameLen is IFNAMSIZ-1: the kernel's limit on a network device name.
const maxIfNameLen = 15

// OVSBridge implements OVSBridgeClient for one bridge over a Connection.
type OVSBridge struct {
	conn *Connection
	cfg  BridgeConfig
}

var _ OVSBridgeClient = (*OVSBridge)(nil)

// NewOVSBridge returns a client for the bridge cfg.Name; it does not create
// the bridge (see Create).
func NewOVSBridge(conn *Connection, cfg BridgeConfig) *OVSBridge {
	if cfg.DatapathType == "" {
		cfg.DatapathType = OVSDatapathSystem
	}
	return &OVSBridge{conn: conn, cfg: cfg}
}

// Connection returns the connection the bridge client uses.
func (b *OVSBridge) Connection() *Connection { return b.conn }

// GetBridgeName returns the bridge name.
func (b *OVSBridge) GetBridgeName() string { return b.cfg.Name }

// GetDatapathType returns the configured datapath type.
func (b *OVSBridge) GetDatapathType() OVSDatapathType { return b.cfg.DatapathType }

// GetOVSVersion returns ovs_version from the Open_vSwitch table.
func (b *OVSBridge) GetOVSVersion(ctx context.Context) (string, error) {
	return b.conn.GetOVSVersion(ctx)
}

func (b *OVSBridge) errNoBridge() error {
	return fmt.Errorf("bridge %s %w", b.cfg.Name, ErrNotFound)
}

// bridge returns the bridge row from the cache, or nil when absent. (The
// error result is for symmetry with the other lookups; the cache read
// cannot fail.)
func (b *OVSBridge) bridge(ctx context.Context) (*bridgeRow, error) {
	return firstRow(b.conn, tableBridge, func(r *bridgeRow) bool { return r.Name == b.cfg.Name }), nil
}

// GetBridgeUUID returns the UUID of the bridge row.
func (b *OVSBridge) GetBridgeUUID(ctx context.Context) (string, error) {
	b.conn.sync(ctx)
	br, err := b.bridge(ctx)
	if err != nil {
		return "", err
	}
	if br == nil {
		return "", b.errNoBridge()
	}
	return br.UUID, nil
}

func (b *OVSBridge) failMode() string {
	if b.cfg.FailModeStandalone {
		return "standalone"
	}
	return "secure"
}

// Create creates the bridge with its local internal port, or converges an
// existing one to the configuration without replacing it.
func (b *OVSBridge) Create(ctx context.Context) error {
	what := "create bridge " + b.cfg.Name
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		br, err := b.bridge(ctx)
		if err != nil {
			return err
		}
		if br != nil {
			return b.converge(ctx, br)
		}
		root, err := b.conn.root()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		// Like ovs-vsctl add-br: the bridge with its local internal port.
		ops := []ovsdb.Operation{
			opInsert(tableInterface, "new_iface", ovsdb.Row{"name": b.cfg.Name, "type": InterfaceTypeInternal}),
			opInsert(tablePort, "new_port", ovsdb.Row{"name": b.cfg.Name, "interfaces": uuidSet("new_iface")}),
			opInsert(tableBridge, "new_bridge", ovsdb.Row{
				"name":          b.cfg.Name,
				"ports":         uuidSet("new_port"),
				"datapath_type": string(b.cfg.DatapathType),
				"protocols":     stringSet(bridgeProtocols()...),
				"fail_mode":     b.failMode(),
				"other_config":  stringMap(b.cfg.OtherConfig),
				"external_ids":  stringMap(b.cfg.ExternalIDs),
			}),
			opMutate(tableOpenVSwitch, root.UUID,
				ovsdb.Mutation{Column: "bridges", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet("new_bridge")}),
		}
		if _, err := b.conn.transact(ctx, what, ops); err != nil {
			return err
		}
		klog.InfoS("Created OVS bridge", "bridge", b.cfg.Name, "datapathType", b.cfg.DatapathType)
		return b.waitBridge(ctx, true)
	})
}

// converge updates only the columns that differ, so a second bring-up writes
// nothing and the bridge keeps its UUID and its flows.
func (b *OVSBridge) converge(ctx context.Context, br *bridgeRow) error {
	row := ovsdb.Row{}
	if br.DatapathType != string(b.cfg.DatapathType) {
		row["datapath_type"] = string(b.cfg.DatapathType)
	}
	if !sameSet(br.Protocols, bridgeProtocols()) {
		row["protocols"] = stringSet(bridgeProtocols()...)
	}
	if fm := b.failMode(); br.FailMode == nil || *br.FailMode != fm {
		row["fail_mode"] = fm
	}
	if merged, changed := mergeMap(br.OtherConfig, b.cfg.OtherConfig); changed {
		row["other_config"] = stringMap(merged)
	}
	if merged, changed := mergeMap(br.ExternalIDs, b.cfg.ExternalIDs); changed {
		row["external_ids"] = stringMap(merged)
	}
	if len(row) == 0 {
		return nil
	}
	what := "update bridge " + b.cfg.Name
	if _, err := b.conn.transact(ctx, what, []ovsdb.Operation{opUpdate(tableBridge, br.UUID, row)}); err != nil {
		return err
	}
	klog.InfoS("Updated OVS bridge", "bridge", b.cfg.Name, "columns", len(row))
	return nil
}

// waitBridge waits until the cache shows the bridge present (or absent).
func (b *OVSBridge) waitBridge(ctx context.Context, present bool) error {
	return b.conn.waitCache(ctx, func() (bool, error) {
		br, err := b.bridge(ctx)
		return (br != nil) == present, err
	})
}

// Delete deletes the bridge; its ports and interfaces go with it.
func (b *OVSBridge) Delete(ctx context.Context) error {
	what := "delete bridge " + b.cfg.Name
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		br, err := b.bridge(ctx)
		if err != nil {
			return err
		}
		if br == nil {
			if retry {
				return nil
			}
			return fmt.Errorf("%s: %w", what, b.errNoBridge())
		}
		root, err := b.conn.root()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		// Ports and interfaces are not root rows: OVSDB collects them once
		// no bridge refers to them.
		ops := []ovsdb.Operation{
			opMutate(tableOpenVSwitch, root.UUID,
				ovsdb.Mutation{Column: "bridges", Mutator: ovsdb.MutateOperationDelete, Value: uuidSet(br.UUID)}),
			opDelete(tableBridge, br.UUID),
		}
		if _, err := b.conn.transact(ctx, what, ops); err != nil {
			return err
		}
		klog.InfoS("Deleted OVS bridge", "bridge", b.cfg.Name)
		return b.waitBridge(ctx, false)
	})
}

// GetExternalIDs returns the bridge's external_ids.
func (b *OVSBridge) GetExternalIDs(ctx context.Context) (map[string]string, error) {
	b.conn.sync(ctx)
	br, err := b.bridge(ctx)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return nil, b.errNoBridge()
	}
	return maps.Clone(br.ExternalIDs), nil
}

// SetExternalIDs merges keys into the bridge's external_ids. The merge is
// done by the server (mutate: delete the keys, insert the new pairs, in one
// transaction), so two calls in a row never lose a key to a stale cache.
func (b *OVSBridge) SetExternalIDs(ctx context.Context, externalIDs map[string]string) error {
	if len(externalIDs) == 0 {
		return nil
	}
	what := "set external_ids of bridge " + b.cfg.Name
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		br, err := b.bridge(ctx)
		if err != nil {
			return err
		}
		if br == nil {
			return fmt.Errorf("%s: %w", what, b.errNoBridge())
		}
		ops := []ovsdb.Operation{mergeKeysOps(tableBridge, br.UUID, "external_ids", externalIDs)}
		if _, err := b.conn.transact(ctx, what, ops); err != nil {
			return err
		}
		return b.conn.waitCache(ctx, func() (bool, error) {
			br, err := b.bridge(ctx)
			return br != nil && hasPairs(br.ExternalIDs, externalIDs), err
		})
	})
}

// sameSet says whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// mergeMap returns base with add's keys set, and whether anything changed.
func mergeMap(base, add map[string]string) (map[string]string, bool) {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	changed := false
	for k, v := range add {
		if old, ok := out[k]; !ok || old != v {
			out[k] = v
			changed = true
		}
	}
	return out, changed
}
