package route

import (
	"net/netip"

	"antrea.io/antrea/pkg/agent/types"
)

// realizes reports whether the node's routes and netfilter (peer routes,
// the node path) are realized for family f: the one boundary of this
// package that dual-stack widens (issue 33), with the netlink calls that
// list FAMILY_V4.
func realizes(f types.IPFamily) bool { return f == types.IPv4 }

// checkRealized refuses an address of a family not realized here, naming
// what it is and the family.
func checkRealized(what string, a netip.Addr) error {
	if f := types.FamilyOf(a); !realizes(f) {
		return types.ErrFamilyNotSupported(what, f)
	}
	return nil
}
