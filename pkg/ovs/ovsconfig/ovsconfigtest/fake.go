// Package ovsconfigtest provides an in-memory ovsconfig.OVSBridgeClient for
// unit tests of its consumers (the CNI server, node bring-up's callers). A
// contract test runs the same cases against it and against a real
// ovsdb-server, so the fake answers what the real client answers.
package ovsconfigtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// FakeBridge is an in-memory bridge. OpenFlow ports are numbered from 1 in
// creation order unless requested, like ovs-vswitchd does for a new bridge.
type FakeBridge struct {
	mu          sync.Mutex
	name        string
	dpType      ovsconfig.OVSDatapathType
	exists      bool
	uuid        string
	ports       map[string]*ovsconfig.OVSPortData // by name
	externalIDs map[string]string
	nextUUID    int
	failures    map[string]string // interface name -> error column
	version     string
}

var _ ovsconfig.OVSBridgeClient = (*FakeBridge)(nil)

// NewFakeBridge returns a fake for a bridge that does not exist yet (call Create).
func NewFakeBridge(name string, dpType ovsconfig.OVSDatapathType) *FakeBridge {
	if dpType == "" {
		dpType = ovsconfig.OVSDatapathSystem
	}
	return &FakeBridge{name: name, dpType: dpType, ports: map[string]*ovsconfig.OVSPortData{}, failures: map[string]string{}, version: "3.1.0"}
}

// FailInterface makes the interface named name fail as ovs-vswitchd reports
// it (ofport -1 and reason in the error column) once it is created, e.g. a
// system port whose device does not exist.
func (f *FakeBridge) FailInterface(name, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[name] = reason
}

// SetOVSVersion sets what GetOVSVersion answers.
func (f *FakeBridge) SetOVSVersion(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version = v
}

func (f *FakeBridge) newUUID() string {
	f.nextUUID++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", f.nextUUID)
}

func (f *FakeBridge) errNoBridge() error {
	return fmt.Errorf("bridge %s %w", f.name, ovsconfig.ErrNotFound)
}

// Create creates the bridge with its local internal port.
func (f *FakeBridge) Create(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exists {
		return nil
	}
	f.exists = true
	f.uuid = f.newUUID()
	f.ports[f.name] = &ovsconfig.OVSPortData{
		UUID: f.newUUID(), Name: f.name, IFName: f.name, IFType: ovsconfig.InterfaceTypeInternal,
		OFPort: 65534, ExternalIDs: map[string]string{},
	}
	return nil
}

// Delete deletes the bridge and its ports.
func (f *FakeBridge) Delete(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return fmt.Errorf("delete bridge %s: %w", f.name, f.errNoBridge())
	}
	f.exists = false
	f.ports = map[string]*ovsconfig.OVSPortData{}
	return nil
}

// GetBridgeName returns the bridge name.
func (f *FakeBridge) GetBridgeName() string { return f.name }

// GetDatapathType returns the datapath type.
func (f *FakeBridge) GetDatapathType() ovsconfig.OVSDatapathType { return f.dpType }

// GetBridgeUUID returns the bridge's UUID.
func (f *FakeBridge) GetBridgeUUID(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return "", f.errNoBridge()
	}
	return f.uuid, nil
}

// CreatePort creates a system port.
func (f *FakeBridge) CreatePort(ctx context.Context, name string, externalIDs map[string]string) (string, error) {
	return f.CreatePortWithConfig(ctx, ovsconfig.PortConfig{Name: name, ExternalIDs: externalIDs})
}

// CreateInternalPort creates an internal port.
func (f *FakeBridge) CreateInternalPort(ctx context.Context, name string, ofPortRequest int32, mac string, externalIDs map[string]string) (string, error) {
	return f.CreatePortWithConfig(ctx, ovsconfig.PortConfig{
		Name: name, Type: ovsconfig.InterfaceTypeInternal, OFPortRequest: ofPortRequest, MAC: mac, ExternalIDs: externalIDs,
	})
}

// CreateTunnelPort creates a tunnel port.
func (f *FakeBridge) CreateTunnelPort(ctx context.Context, cfg ovsconfig.TunnelConfig) (string, error) {
	if !cfg.Type.Valid() {
		return "", fmt.Errorf("port %s: bad tunnel type %q (want %s)", cfg.Name, cfg.Type, ovsconfig.TunnelTypeNames())
	}
	return f.CreatePortWithConfig(ctx, ovsconfig.PortConfig{
		Name: cfg.Name, Type: string(cfg.Type), OFPortRequest: cfg.OFPortRequest,
		Options: ovsconfig.TunnelOptions(cfg), ExternalIDs: cfg.ExternalIDs,
	})
}

// CreatePortWithConfig creates a port of any supported type.
func (f *FakeBridge) CreatePortWithConfig(ctx context.Context, cfg ovsconfig.PortConfig) (string, error) {
	switch cfg.Type {
	case ovsconfig.InterfaceTypeSystem, "system", ovsconfig.InterfaceTypeInternal, "tap",
		ovsconfig.InterfaceTypeGeneve, ovsconfig.InterfaceTypeVXLAN, ovsconfig.InterfaceTypeGRE, "stt", ovsconfig.InterfaceTypePatch:
	default:
		return "", fmt.Errorf("port %s: bad type %q", cfg.Name, cfg.Type)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("create port %s on bridge %s", cfg.Name, f.name)
	if !f.exists {
		return "", fmt.Errorf("%s: %w", what, f.errNoBridge())
	}
	if _, ok := f.ports[cfg.Name]; ok {
		return "", fmt.Errorf("%s: port %s %w", what, cfg.Name, ovsconfig.ErrAlreadyExists)
	}
	p := &ovsconfig.OVSPortData{
		UUID: f.newUUID(), Name: cfg.Name, IFName: cfg.Name, IFType: cfg.Type, MAC: cfg.MAC,
		Options: maps.Clone(cfg.Options), ExternalIDs: maps.Clone(cfg.ExternalIDs),
	}
	if p.ExternalIDs == nil {
		p.ExternalIDs = map[string]string{}
	}
	if reason, ok := f.failures[cfg.Name]; ok {
		p.OFPort, p.Error = -1, reason
	} else {
		p.OFPort = f.allocOFPort(cfg.OFPortRequest)
	}
	f.ports[cfg.Name] = p
	return p.UUID, nil
}

// allocOFPort honours a free request, else takes the lowest free number.
func (f *FakeBridge) allocOFPort(req int32) int32 {
	used := map[int32]bool{}
	for _, p := range f.ports {
		used[p.OFPort] = true
	}
	if req > 0 && !used[req] {
		return req
	}
	for n := int32(1); ; n++ {
		if !used[n] {
			return n
		}
	}
}

// DeletePort deletes one port by UUID.
func (f *FakeBridge) DeletePort(ctx context.Context, portUUID string) error {
	return f.DeletePorts(ctx, []string{portUUID})
}

// DeletePorts deletes ports by UUID, all or none.
func (f *FakeBridge) DeletePorts(ctx context.Context, portUUIDs []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("delete ports %v from bridge %s", portUUIDs, f.name)
	if !f.exists {
		return fmt.Errorf("%s: %w", what, f.errNoBridge())
	}
	var names []string
	for _, id := range portUUIDs {
		found := ""
		for n, p := range f.ports {
			if p.UUID == id {
				found = n
			}
		}
		if found == "" {
			return fmt.Errorf("%s: port %s on bridge %s %w", what, id, f.name, ovsconfig.ErrNotFound)
		}
		names = append(names, found)
	}
	for _, n := range names {
		delete(f.ports, n)
	}
	return nil
}

// GetOFPort returns the interface's OpenFlow port.
func (f *FakeBridge) GetOFPort(ctx context.Context, ifName string) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[ifName]
	if !ok {
		return 0, fmt.Errorf("interface %s %w", ifName, ovsconfig.ErrNotFound)
	}
	if p.OFPort < 0 {
		return 0, fmt.Errorf("interface %s: ovs-vswitchd failed to add it (ofport -1): %s", ifName, p.Error)
	}
	return p.OFPort, nil
}

func clonePort(p *ovsconfig.OVSPortData) ovsconfig.OVSPortData {
	c := *p
	c.Options = maps.Clone(p.Options)
	c.ExternalIDs = maps.Clone(p.ExternalIDs)
	return c
}

// GetPortData returns one port by name.
func (f *FakeBridge) GetPortData(ctx context.Context, name string) (*ovsconfig.OVSPortData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, f.errNoBridge()
	}
	p, ok := f.ports[name]
	if !ok {
		return nil, fmt.Errorf("port %s on bridge %s %w", name, f.name, ovsconfig.ErrNotFound)
	}
	c := clonePort(p)
	return &c, nil
}

// GetPortList returns every port sorted by name.
func (f *FakeBridge) GetPortList(ctx context.Context) ([]ovsconfig.OVSPortData, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, f.errNoBridge()
	}
	out := make([]ovsconfig.OVSPortData, 0, len(f.ports))
	for _, p := range f.ports {
		out = append(out, clonePort(p))
	}
	slices.SortFunc(out, func(a, b ovsconfig.OVSPortData) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetPortExternalIDs replaces a port's external_ids.
func (f *FakeBridge) SetPortExternalIDs(ctx context.Context, portName string, externalIDs map[string]string) error {
	return f.update("set external_ids of port "+portName, "port", portName, func(p *ovsconfig.OVSPortData) {
		p.ExternalIDs = maps.Clone(externalIDs)
	})
}

// SetInterfaceOptions replaces an interface's options.
func (f *FakeBridge) SetInterfaceOptions(ctx context.Context, ifName string, options map[string]string) error {
	return f.update("set options of interface "+ifName, "interface", ifName, func(p *ovsconfig.OVSPortData) {
		p.Options = maps.Clone(options)
	})
}

// SetInterfaceMTU accepts a positive MTU for an existing interface.
func (f *FakeBridge) SetInterfaceMTU(ctx context.Context, ifName string, mtu int) error {
	if mtu <= 0 {
		return fmt.Errorf("interface %s: bad MTU %d", ifName, mtu)
	}
	return f.update("set MTU of interface "+ifName, "interface", ifName, func(*ovsconfig.OVSPortData) {})
}

// SetInterfaceMAC sets an interface's MAC.
func (f *FakeBridge) SetInterfaceMAC(ctx context.Context, ifName string, mac string) error {
	return f.update("set MAC of interface "+ifName, "interface", ifName, func(p *ovsconfig.OVSPortData) { p.MAC = mac })
}

func (f *FakeBridge) update(what, kind, name string, set func(p *ovsconfig.OVSPortData)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[name]
	if !ok {
		return fmt.Errorf("%s: %s %s %w", what, kind, name, ovsconfig.ErrNotFound)
	}
	set(p)
	return nil
}

// GetOVSVersion returns the version set by SetOVSVersion (3.1.0 by default).
func (f *FakeBridge) GetOVSVersion(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.version == "" {
		return "", errors.New("Open_vSwitch table: ovs_version is not set")
	}
	return f.version, nil
}

// GetExternalIDs returns the bridge's external_ids.
func (f *FakeBridge) GetExternalIDs(ctx context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, f.errNoBridge()
	}
	out := maps.Clone(f.externalIDs)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// SetExternalIDs merges keys into the bridge's external_ids.
func (f *FakeBridge) SetExternalIDs(ctx context.Context, externalIDs map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return fmt.Errorf("set external_ids of bridge %s: %w", f.name, f.errNoBridge())
	}
	if f.externalIDs == nil {
		f.externalIDs = map[string]string{}
	}
	maps.Copy(f.externalIDs, externalIDs)
	return nil
}
