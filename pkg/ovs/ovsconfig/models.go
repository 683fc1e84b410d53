package ovsconfig

import (
	"fmt"

	"github.com/ovn-org/libovsdb/model"
)

// The models below hold only the columns the agent reads or writes; libovsdb
// maps the rest of each row to nothing. Column types follow
// /usr/share/openvswitch/vswitch.ovsschema: an optional scalar (min 0, max 1)
// is a pointer, a set is a slice, a map is a map.

// ovsRow is the root Open_vSwitch table (one row).
type ovsRow struct {
	UUID        string            `ovsdb:"_uuid"`
	Bridges     []string          `ovsdb:"bridges"`
	OVSVersion  *string           `ovsdb:"ovs_version"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
	OtherConfig map[string]string `ovsdb:"other_config"`
}

// bridgeRow is a row of the Bridge table.
type bridgeRow struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Ports        []string          `ovsdb:"ports"`
	DatapathType string            `ovsdb:"datapath_type"`
	Protocols    []string          `ovsdb:"protocols"`
	FailMode     *string           `ovsdb:"fail_mode"`
	OtherConfig  map[string]string `ovsdb:"other_config"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
}

// portRow is a row of the Port table.
type portRow struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Interfaces  []string          `ovsdb:"interfaces"`
	Tag         *int              `ovsdb:"tag"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
	OtherConfig map[string]string `ovsdb:"other_config"`
}

// interfaceRow is a row of the Interface table.
type interfaceRow struct {
	UUID          string            `ovsdb:"_uuid"`
	Name          string            `ovsdb:"name"`
	Type          string            `ovsdb:"type"`
	Options       map[string]string `ovsdb:"options"`
	OFPort        *int              `ovsdb:"ofport"`
	OFPortRequest *int              `ovsdb:"ofport_request"`
	MAC           *string           `ovsdb:"mac"`
	MACInUse      *string           `ovsdb:"mac_in_use"`
	Error         *string           `ovsdb:"error"`
	MTURequest    *int              `ovsdb:"mtu_request"`
	ExternalIDs   map[string]string `ovsdb:"external_ids"`
	OtherConfig   map[string]string `ovsdb:"other_config"`
}

const (
	tableOpenVSwitch = "Open_vSwitch"
	tableBridge      = "Bridge"
	tablePort        = "Port"
	tableInterface   = "Interface"
)

// newClientDBModel describes the part of the Open_vSwitch database we use.
func newClientDBModel() (model.ClientDBModel, error) {
	m, err := model.NewClientDBModel("Open_vSwitch", map[string]model.Model{
		tableOpenVSwitch: &ovsRow{},
		tableBridge:      &bridgeRow{},
		tablePort:        &portRow{},
		tableInterface:   &interfaceRow{},
	})
	if err != nil {
		return model.ClientDBModel{}, fmt.Errorf("build Open_vSwitch client model: %w", err)
	}
	return m, nil
}
