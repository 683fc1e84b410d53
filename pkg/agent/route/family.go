package route

import (
	"net/netip"

	"antrea.io/antrea/pkg/agent/types"
)

// realizes reports whether the node's routes (peer routes: a peer is
// reached by its pod CIDR and node IP of this family) and the node path's
// default are realized for family f: IPv4. A dual-stack node's node path
// serves IPv6 beside it when given the node's IPv6 gateway and pod CIDR
// (NodePathConfig.GatewayIPv6); an IPv6-only node is issue 33's.
func realizes(f types.IPFamily) bool { return f == types.IPv4 }

// checkRealized refuses an address of a family not realized here, naming
// what it is and the family.
func checkRealized(what string, a netip.Addr) error {
	if f := types.FamilyOf(a); !realizes(f) {
		return types.ErrFamilyNotSupported(what, f)
	}
	return nil
}
