package egress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// vlanPorts makes the interfaces that hold the Egress IPs of a subnet on a
// VLAN (VLANLinks): internal ports of br-phy, "antrea-ext.<VLAN>",
// tagged with the VLAN, so ovs-vswitchd tags their frames on the uplink
// and hands them only that VLAN's. Upstream makes a kernel VLAN
// sub-interface of the transport interface instead; this kernel has no
// 802.1Q devices, and with the userspace datapath the uplink belongs to
// br-phy anyway. (With the kernel datapath there is no br-phy: VLAN
// subnets are refused there, by the assigner, with that reason.)
type OVSVLANLinks struct{ br *ovsconfig.OVSBridge }

// NewOVSVLANLinks makes the VLAN links on bridge (br-phy) of conn.
func NewOVSVLANLinks(conn *ovsconfig.Connection, bridge string) *OVSVLANLinks {
	return &OVSVLANLinks{br: ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: bridge,
		DatapathType: ovsconfig.OVSDatapathNetdev})}
}

// Ensure makes the port of vlan, waits for its device, sets it up and lets
// it take replies whose source the main table routes elsewhere (loose
// reverse-path filter: the subnet's traffic comes back on the VLAN while
// the node's default route leaves by br-phy).
func (v *OVSVLANLinks) Ensure(vlan int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := VLANLink(vlan)
	p, err := v.br.GetPortData(ctx, name)
	switch {
	case errors.Is(err, ovsconfig.ErrNotFound):
		if _, err := v.br.CreatePortWithConfig(ctx, ovsconfig.PortConfig{Name: name, Type: ovsconfig.InterfaceTypeInternal,
			VLAN: vlan, ExternalIDs: map[string]string{"antrea-type": "egress-vlan"}}); err != nil {
			return fmt.Errorf("VLAN %d: %w", vlan, err)
		}
		klog.InfoS("Created the link of an Egress subnet's VLAN", "link", name, "vlan", vlan)
	case err != nil:
		return fmt.Errorf("VLAN %d: %w", vlan, err)
	case p.VLAN != vlan:
		return fmt.Errorf("VLAN %d: port %s exists with tag %d", vlan, name, p.VLAN)
	}
	var link netlink.Link
	for {
		if link, err = netlink.LinkByName(name); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("VLAN %d: device %s did not appear: %w", vlan, name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("VLAN %d: set %s up: %w", vlan, name, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/rp_filter", []byte("2"), 0o644); err != nil {
		return fmt.Errorf("VLAN %d: loose reverse-path filter on %s: %w", vlan, name, err)
	}
	return nil
}

// Keep removes the VLAN ports of every VLAN but keep.
func (v *OVSVLANLinks) Keep(keep []int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ports, err := v.br.GetPortList(ctx)
	if err != nil {
		if errors.Is(err, ovsconfig.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("VLAN links: %w", err)
	}
	var gone []string
	for _, p := range ports {
		if !strings.HasPrefix(p.Name, VLANLinkPrefix) || slices.ContainsFunc(keep, func(vlan int) bool { return VLANLink(vlan) == p.Name }) {
			continue
		}
		gone = append(gone, p.UUID)
		klog.InfoS("Removing the link of a VLAN no Egress IP here is on", "link", p.Name)
	}
	if len(gone) == 0 {
		return nil
	}
	return v.br.DeletePorts(ctx, gone)
}
