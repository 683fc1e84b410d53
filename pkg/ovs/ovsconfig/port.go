package ovsconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"
)

// CreatePort attaches an existing network device (type "", "system" in OVS).
func (b *OVSBridge) CreatePort(ctx context.Context, name string, externalIDs map[string]string) (string, error) {
	return b.CreatePortWithConfig(ctx, PortConfig{Name: name, Type: InterfaceTypeSystem, ExternalIDs: externalIDs})
}

// CreateInternalPort creates an internal port; mac may be "" and
// ofPortRequest 0 to let OVS choose.
func (b *OVSBridge) CreateInternalPort(ctx context.Context, name string, ofPortRequest int32, mac string, externalIDs map[string]string) (string, error) {
	return b.CreatePortWithConfig(ctx, PortConfig{
		Name: name, Type: InterfaceTypeInternal, OFPortRequest: ofPortRequest, MAC: mac, ExternalIDs: externalIDs,
	})
}

// TunnelOptions returns the Interface options of a tunnel: "flow" for the
// remote IP and key unless fixed (ovs-vswitchd.conf.db(5), "Tunnel Options").
func TunnelOptions(cfg TunnelConfig) map[string]string {
	opts := map[string]string{"remote_ip": "flow", "key": "flow"}
	if cfg.Type == GRETunnel {
		// Nothing sets a tunnel ID: without a key, the GRE header is 4
		// bytes, not 8 (nodeinit's MTU counts on it, as upstream's
		// 38-byte GRE overhead does).
		delete(opts, "key")
	}
	if cfg.RemoteIP != "" {
		opts["remote_ip"] = cfg.RemoteIP
	}
	if cfg.Key != "" {
		opts["key"] = cfg.Key
	}
	if cfg.LocalIP != "" {
		opts["local_ip"] = cfg.LocalIP
	}
	if cfg.DestinationPort != 0 {
		opts["dst_port"] = strconv.Itoa(cfg.DestinationPort)
	}
	if cfg.CSum {
		opts["csum"] = "true"
	}
	return opts
}

// CreateTunnelPort creates a tunnel port (flow-based unless RemoteIP/Key are set).
func (b *OVSBridge) CreateTunnelPort(ctx context.Context, cfg TunnelConfig) (string, error) {
	if !cfg.Type.Valid() {
		return "", fmt.Errorf("port %s: bad tunnel type %q (want %s)", cfg.Name, cfg.Type, TunnelTypeNames())
	}
	return b.CreatePortWithConfig(ctx, PortConfig{
		Name: cfg.Name, Type: string(cfg.Type), OFPortRequest: cfg.OFPortRequest,
		Options: TunnelOptions(cfg), ExternalIDs: cfg.ExternalIDs,
	})
}

// validate checks what ovs-vswitchd would only reject later, in the interface's
// error column, so the caller hears about it at once and by name.
func (cfg *PortConfig) validate() error {
	if cfg.Name == "" {
		return errors.New("port: empty name")
	}
	if !isKnownInterfaceType(cfg.Type) {
		return fmt.Errorf("port %s: bad type %q", cfg.Name, cfg.Type)
	}
	if len(cfg.Name) > maxIfNameLen && cfg.Type != InterfaceTypePatch {
		return fmt.Errorf("port %s: name longer than %d characters", cfg.Name, maxIfNameLen)
	}
	if cfg.OFPortRequest < 0 || cfg.OFPortRequest > 65279 {
		return fmt.Errorf("port %s: ofport_request %d out of range 1-65279", cfg.Name, cfg.OFPortRequest)
	}
	if cfg.VLAN < 0 || cfg.VLAN > 4094 {
		return fmt.Errorf("port %s: VLAN %d out of range 1-4094", cfg.Name, cfg.VLAN)
	}
	return nil
}

// CreatePortWithConfig creates the Interface and Port rows and adds the port to
// the bridge in one transaction, then waits until the monitored cache shows
// it, so a following GetPortData/GetPortList sees the new port.
func (b *OVSBridge) CreatePortWithConfig(ctx context.Context, cfg PortConfig) (string, error) {
	if err := cfg.validate(); err != nil {
		return "", err
	}
	what := fmt.Sprintf("create port %s on bridge %s", cfg.Name, b.cfg.Name)
	var portUUID string
	err := b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		var err error
		portUUID, err = b.createPortOnce(ctx, what, cfg, retry)
		return err
	})
	if err != nil {
		return "", err
	}
	klog.InfoS("Created OVS port", "bridge", b.cfg.Name, "port", cfg.Name, "type", cfg.Type, "uuid", portUUID)
	return portUUID, nil
}

// createPortOnce is one attempt of CreatePortWithConfig. On a retry, a port
// of that name that is on the bridge with the external_ids we asked for is
// our own earlier write, whose answer was lost with the connection.
func (b *OVSBridge) createPortOnce(ctx context.Context, what string, cfg PortConfig, retry bool) (string, error) {
	br, err := b.bridge(ctx)
	if err != nil {
		return "", err
	}
	if br == nil {
		return "", fmt.Errorf("%s: %w", what, b.errNoBridge())
	}
	existing, err := b.conn.port(ctx, cfg.Name)
	if err != nil {
		return "", err
	}
	if existing != nil {
		if retry && slices.Contains(br.Ports, existing.UUID) && maps.Equal(existing.ExternalIDs, cfg.ExternalIDs) {
			return existing.UUID, nil
		}
		return "", fmt.Errorf("%s: port %s %w", what, cfg.Name, ErrAlreadyExists)
	}
	iface := ovsdb.Row{"name": cfg.Name, "type": cfg.Type, "options": stringMap(cfg.Options)}
	if cfg.OFPortRequest > 0 {
		iface["ofport_request"] = int(cfg.OFPortRequest)
	}
	if cfg.MAC != "" {
		iface["mac"] = cfg.MAC
	}
	if cfg.MTU > 0 {
		iface["mtu_request"] = cfg.MTU
	}
	port := ovsdb.Row{"name": cfg.Name, "interfaces": uuidSet("new_iface"), "external_ids": stringMap(cfg.ExternalIDs)}
	if cfg.VLAN > 0 {
		port["tag"] = cfg.VLAN
	}
	ops := []ovsdb.Operation{
		opInsert(tableInterface, "new_iface", iface),
		opInsert(tablePort, "new_port", port),
		opMutate(tableBridge, br.UUID,
			ovsdb.Mutation{Column: "ports", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet("new_port")}),
	}
	results, err := b.conn.transact(ctx, what, ops)
	if err != nil {
		return "", err
	}
	portUUID := results[1].UUID.GoUUID
	return portUUID, b.conn.waitCache(ctx, func() (bool, error) {
		p, err := b.conn.port(ctx, cfg.Name)
		return p != nil, err
	})
}

// DeletePort deletes one port by UUID.
func (b *OVSBridge) DeletePort(ctx context.Context, portUUID string) error {
	return b.DeletePorts(ctx, []string{portUUID})
}

// DeletePorts removes the ports from the bridge and deletes their Port and
// Interface rows, all in one transaction.
func (b *OVSBridge) DeletePorts(ctx context.Context, portUUIDs []string) error {
	if len(portUUIDs) == 0 {
		return nil
	}
	what := fmt.Sprintf("delete ports %v from bridge %s", portUUIDs, b.cfg.Name)
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		return b.deletePortsOnce(ctx, what, portUUIDs, retry)
	})
}

// deletePortsOnce is one attempt of DeletePorts. On a retry, a missing port
// was deleted by the attempt whose answer was lost.
func (b *OVSBridge) deletePortsOnce(ctx context.Context, what string, portUUIDs []string, retry bool) error {
	br, err := b.bridge(ctx)
	if err != nil {
		return err
	}
	if br == nil {
		return fmt.Errorf("%s: %w", what, b.errNoBridge())
	}
	var ops []ovsdb.Operation
	var present []string
	for _, id := range portUUIDs {
		p, err := b.conn.portByUUID(ctx, id)
		if err != nil {
			return err
		}
		if p == nil || !slices.Contains(br.Ports, id) {
			if retry {
				continue // deleted by the attempt whose answer was lost
			}
			return fmt.Errorf("%s: port %s on bridge %s %w", what, id, b.cfg.Name, ErrNotFound)
		}
		present = append(present, id)
		ops = append(ops, opDelete(tablePort, id))
		for _, ifID := range p.Interfaces {
			ops = append(ops, opDelete(tableInterface, ifID))
		}
	}
	if len(present) == 0 {
		return nil
	}
	// The bridge's reference goes first: OVSDB checks references at commit,
	// but a reader of the transaction sees the intent in order.
	mut := opMutate(tableBridge, br.UUID,
		ovsdb.Mutation{Column: "ports", Mutator: ovsdb.MutateOperationDelete, Value: uuidSet(present...)})
	if _, err := b.conn.transact(ctx, what, append([]ovsdb.Operation{mut}, ops...)); err != nil {
		return err
	}
	klog.InfoS("Deleted OVS ports", "bridge", b.cfg.Name, "ports", present)
	return b.conn.waitCache(ctx, func() (bool, error) {
		for _, id := range present {
			p, err := b.conn.portByUUID(ctx, id)
			if err != nil || p != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// GetOFPort waits until ovs-vswitchd has written the interface's ofport.
func (b *OVSBridge) GetOFPort(ctx context.Context, ifName string) (int32, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	var ofPort int32
	b.conn.sync(ctx)
	err := b.conn.waitCache(ctx, func() (bool, error) {
		iface, err := b.conn.iface(ctx, ifName)
		if err != nil {
			return false, err
		}
		if iface == nil {
			return false, fmt.Errorf("interface %s %w", ifName, ErrNotFound)
		}
		if iface.OFPort == nil || *iface.OFPort == 0 {
			return false, nil
		}
		if *iface.OFPort < 0 {
			msg := "no reason given"
			if iface.Error != nil {
				msg = *iface.Error
			}
			return false, fmt.Errorf("interface %s: ovs-vswitchd failed to add it (ofport -1): %s", ifName, msg)
		}
		ofPort = int32(*iface.OFPort)
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("interface %s: no OpenFlow port number reported: %w", ifName, err)
		}
		return 0, err
	}
	return ofPort, nil
}

// GetPortData returns the port named name on this bridge.
func (b *OVSBridge) GetPortData(ctx context.Context, name string) (*OVSPortData, error) {
	b.conn.sync(ctx)
	br, err := b.bridge(ctx)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return nil, b.errNoBridge()
	}
	p, err := b.conn.port(ctx, name)
	if err != nil {
		return nil, err
	}
	if p == nil || !slices.Contains(br.Ports, p.UUID) {
		return nil, fmt.Errorf("port %s on bridge %s %w", name, b.cfg.Name, ErrNotFound)
	}
	return b.conn.portData(ctx, p)
}

// GetPortList returns every port of the bridge, sorted by name.
func (b *OVSBridge) GetPortList(ctx context.Context) ([]OVSPortData, error) {
	b.conn.sync(ctx)
	br, err := b.bridge(ctx)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return nil, b.errNoBridge()
	}
	out := make([]OVSPortData, 0, len(br.Ports))
	for _, id := range br.Ports {
		p, err := b.conn.portByUUID(ctx, id)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue // the bridge row arrived before the port row
		}
		d, err := b.conn.portData(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	slices.SortFunc(out, func(x, y OVSPortData) int {
		if x.Name < y.Name {
			return -1
		} else if x.Name > y.Name {
			return 1
		}
		return 0
	})
	return out, nil
}

// SetPortExternalIDs replaces a port's external_ids and returns once the
// monitored cache shows them, so a following GetPortData reads them.
func (b *OVSBridge) SetPortExternalIDs(ctx context.Context, portName string, externalIDs map[string]string) error {
	what := "set external_ids of port " + portName
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		p, err := b.conn.port(ctx, portName)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("%s: port %s %w", what, portName, ErrNotFound)
		}
		ops := []ovsdb.Operation{opUpdate(tablePort, p.UUID, ovsdb.Row{"external_ids": stringMap(externalIDs)})}
		if _, err := b.conn.transact(ctx, what, ops); err != nil {
			return err
		}
		return b.conn.waitCache(ctx, func() (bool, error) {
			p, err := b.conn.port(ctx, portName)
			return p != nil && maps.Equal(p.ExternalIDs, externalIDs), err
		})
	})
}

// updateInterface writes row's columns to the named interface and waits
// until the cache satisfies done.
func (b *OVSBridge) updateInterface(ctx context.Context, what, ifName string, row ovsdb.Row, done func(r *interfaceRow) bool) error {
	return b.conn.do(ctx, what, func(ctx context.Context, retry bool) error {
		r, err := b.conn.iface(ctx, ifName)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("%s: interface %s %w", what, ifName, ErrNotFound)
		}
		if _, err := b.conn.transact(ctx, what, []ovsdb.Operation{opUpdate(tableInterface, r.UUID, row)}); err != nil {
			return err
		}
		return b.conn.waitCache(ctx, func() (bool, error) {
			r, err := b.conn.iface(ctx, ifName)
			return r != nil && done(r), err
		})
	})
}

// SetInterfaceOptions replaces an interface's options.
func (b *OVSBridge) SetInterfaceOptions(ctx context.Context, ifName string, options map[string]string) error {
	return b.updateInterface(ctx, "set options of interface "+ifName, ifName,
		ovsdb.Row{"options": stringMap(options)},
		func(r *interfaceRow) bool { return maps.Equal(r.Options, options) })
}

// SetInterfaceMTU sets an interface's mtu_request.
func (b *OVSBridge) SetInterfaceMTU(ctx context.Context, ifName string, mtu int) error {
	if mtu <= 0 {
		return fmt.Errorf("interface %s: bad MTU %d", ifName, mtu)
	}
	return b.updateInterface(ctx, "set MTU of interface "+ifName, ifName,
		ovsdb.Row{"mtu_request": mtu},
		func(r *interfaceRow) bool { return r.MTURequest != nil && *r.MTURequest == mtu })
}

// SetInterfaceMAC sets an interface's mac column.
func (b *OVSBridge) SetInterfaceMAC(ctx context.Context, ifName string, mac string) error {
	return b.updateInterface(ctx, "set MAC of interface "+ifName, ifName,
		ovsdb.Row{"mac": mac},
		func(r *interfaceRow) bool { return r.MAC != nil && *r.MAC == mac })
}

// The lookups below read the monitored cache; their error result is kept
// so that callers read alike, but a cache read cannot fail.

// port returns the Port row named name from the cache, or nil.
func (c *Connection) port(ctx context.Context, name string) (*portRow, error) {
	return firstRow(c, tablePort, func(r *portRow) bool { return r.Name == name }), nil
}

// portByUUID returns the Port row with that UUID from the cache, or nil.
func (c *Connection) portByUUID(ctx context.Context, id string) (*portRow, error) {
	return firstRow(c, tablePort, func(r *portRow) bool { return r.UUID == id }), nil
}

// iface returns the Interface row named name from the cache, or nil.
func (c *Connection) iface(ctx context.Context, name string) (*interfaceRow, error) {
	return firstRow(c, tableInterface, func(r *interfaceRow) bool { return r.Name == name }), nil
}

// ifaceByUUID returns the Interface row with that UUID from the cache, or nil.
func (c *Connection) ifaceByUUID(ctx context.Context, id string) (*interfaceRow, error) {
	return firstRow(c, tableInterface, func(r *interfaceRow) bool { return r.UUID == id }), nil
}

// portData joins a Port row with its first Interface row.
func (c *Connection) portData(ctx context.Context, p *portRow) (*OVSPortData, error) {
	d := &OVSPortData{UUID: p.UUID, Name: p.Name, ExternalIDs: maps.Clone(p.ExternalIDs)}
	if d.ExternalIDs == nil {
		d.ExternalIDs = map[string]string{}
	}
	if p.Tag != nil {
		d.VLAN = *p.Tag
	}
	if len(p.Interfaces) == 0 {
		return d, nil
	}
	iface, err := c.ifaceByUUID(ctx, p.Interfaces[0])
	if err != nil {
		return nil, err
	}
	if iface == nil {
		return d, nil
	}
	d.IFName = iface.Name
	d.IFType = iface.Type
	d.Options = maps.Clone(iface.Options)
	if iface.OFPort != nil {
		d.OFPort = int32(*iface.OFPort)
	}
	// The requested MAC wins: mac_in_use briefly shows the random MAC the
	// device was created with before ovs-vswitchd applies the request.
	if iface.MAC != nil {
		d.MAC = *iface.MAC
	} else if iface.MACInUse != nil {
		d.MAC = *iface.MACInUse
	}
	if iface.Error != nil {
		d.Error = *iface.Error
	}
	return d, nil
}
