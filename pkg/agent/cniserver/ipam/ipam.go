// Package ipam allocates pod IP addresses for the CNIServer. Driver is the
// extension point (seed 001, "Extension points": IPAM is pluggable); HostLocal
// is the default driver, with the semantics of the reference host-local plugin
// on the node's podCIDR(s): the first address of each CIDR is the gateway,
// reservations live on disk (one file per address, keyed by container ID and
// interface name) so they survive an agent restart.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
)

// Owner identifies an attachment: the CNI spec keys attachments by container
// ID and interface name; the pod is there for logs and for drivers that
// allocate per pod.
type Owner struct {
	ContainerID  string
	IfName       string
	PodNamespace string
	PodName      string
}

// String names the owner in logs and errors.
func (o Owner) String() string {
	return fmt.Sprintf("%s/%s (container %s, %s)", o.PodNamespace, o.PodName, o.ContainerID, o.IfName)
}

// ErrNotAllocated is wrapped by Check when the owner holds no address.
var ErrNotAllocated = errors.New("no address allocated")

// Driver allocates and releases pod addresses. Every method is safe for
// concurrent use.
type Driver interface {
	// Add allocates one address per configured family (or returns the ones
	// the owner already holds, so that a retried ADD is idempotent).
	Add(ctx context.Context, owner Owner) ([]*current.IPConfig, error)
	// Del releases the owner's addresses; releasing nothing is not an error.
	Del(ctx context.Context, owner Owner) error
	// Check returns the addresses the owner holds (ErrNotAllocated if none).
	Check(ctx context.Context, owner Owner) ([]net.IP, error)
	// GC releases every address whose owner is not in valid.
	GC(ctx context.Context, valid []types.GCAttachment) error
}

// HostLocal is the host-local driver: one allocator per podCIDR, all sharing
// one on-disk store.
type HostLocal struct {
	// mu serialises allocations inside this process: the disk store's lock is
	// an flock on one shared file descriptor, which does not exclude
	// goroutines of the same process from each other.
	mu         sync.Mutex
	store      *disk.Store
	allocators []*allocator.IPAllocator
	ranges     []allocator.RangeSet
}

var _ Driver = &HostLocal{}

// NewHostLocal opens (or creates) the store under dataDir/network and builds
// an allocator for each podCIDR. The gateway of a CIDR is its first address
// and is never handed out.
func NewHostLocal(network, dataDir string, podCIDRs []*net.IPNet) (*HostLocal, error) {
	if len(podCIDRs) == 0 {
		return nil, errors.New("host-local IPAM: no podCIDR configured")
	}
	store, err := disk.New(network, dataDir)
	if err != nil {
		return nil, fmt.Errorf("host-local IPAM: open store %s/%s: %w", dataDir, network, err)
	}
	h := &HostLocal{store: store}
	for i, cidr := range podCIDRs {
		rs := allocator.RangeSet{allocator.Range{Subnet: types.IPNet(*cidr)}}
		if err := rs.Canonicalize(); err != nil {
			store.Close()
			return nil, fmt.Errorf("host-local IPAM: podCIDR %s: %w", cidr, err)
		}
		h.ranges = append(h.ranges, rs)
		h.allocators = append(h.allocators, allocator.NewIPAllocator(&h.ranges[i], store, i))
	}
	return h, nil
}

// Gateways returns the gateway address of each podCIDR, in order.
func (h *HostLocal) Gateways() []net.IP {
	gws := make([]net.IP, 0, len(h.ranges))
	for _, rs := range h.ranges {
		gws = append(gws, rs[0].Gateway)
	}
	return gws
}

// Close releases the store's lock file.
func (h *HostLocal) Close() error { return h.store.Close() }

// Add implements Driver.
func (h *HostLocal) Add(_ context.Context, owner Owner) ([]*current.IPConfig, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := h.store.GetByID(owner.ContainerID, owner.IfName)
	var ips []*current.IPConfig
	for i, a := range h.allocators {
		if ip := h.heldIn(i, held); ip != nil {
			// A retried ADD (e.g. after an agent crash) gets what it already has.
			r := h.ranges[i][0]
			ips = append(ips, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: r.Subnet.Mask}, Gateway: r.Gateway})
			continue
		}
		ipc, err := a.Get(owner.ContainerID, owner.IfName, nil)
		if err != nil {
			for j := 0; j < i; j++ {
				_ = h.allocators[j].Release(owner.ContainerID, owner.IfName)
			}
			return nil, fmt.Errorf("allocate an address in %s for %s: %w", h.ranges[i].String(), owner, err)
		}
		ips = append(ips, ipc)
	}
	return ips, nil
}

func (h *HostLocal) heldIn(rangeIdx int, held []net.IP) net.IP {
	for _, ip := range held {
		if h.ranges[rangeIdx].Contains(ip) {
			return ip
		}
	}
	return nil
}

// Del implements Driver.
func (h *HostLocal) Del(_ context.Context, owner Owner) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Every allocator shares the store, so one release frees all families.
	if err := h.allocators[0].Release(owner.ContainerID, owner.IfName); err != nil {
		return fmt.Errorf("release the addresses of %s: %w", owner, err)
	}
	return nil
}

// Check implements Driver.
func (h *HostLocal) Check(_ context.Context, owner Owner) ([]net.IP, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.store.Lock(); err != nil {
		return nil, fmt.Errorf("lock the IPAM store: %w", err)
	}
	defer h.store.Unlock()
	ips := h.store.GetByID(owner.ContainerID, owner.IfName)
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s: %w", owner, ErrNotAllocated)
	}
	return ips, nil
}

// GC implements Driver.
func (h *HostLocal) GC(_ context.Context, valid []types.GCAttachment) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.store.GC(valid); err != nil {
		return fmt.Errorf("garbage-collect IPAM reservations: %w", err)
	}
	return nil
}
