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
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// one on-disk store in the reference plugin's format (a file per address,
// named by the address, holding "containerID\r\nifname").
type HostLocal struct {
	// mu serialises allocations inside this process: the disk store's lock is
	// an flock on one shared file descriptor, which does not exclude
	// goroutines of the same process from each other.
	mu         sync.Mutex
	store      *disk.Store
	dir        string
	allocators []*allocator.IPAllocator
	ranges     []allocator.RangeSet
	// held mirrors the reservations on disk, by owner key: the store can only
	// answer "what does this owner hold" by reading every reservation file,
	// which made each ADD O(pods) and serialised concurrent ADDs behind it.
	held map[string][]net.IP
}

var _ Driver = &HostLocal{}

// NewHostLocal opens (or creates) the store under dataDir/network, reads the
// reservations it holds and builds an allocator for each podCIDR. The gateway
// of a CIDR is its first address and is never handed out.
func NewHostLocal(network, dataDir string, podCIDRs []*net.IPNet) (*HostLocal, error) {
	if len(podCIDRs) == 0 {
		return nil, errors.New("host-local IPAM: no podCIDR configured")
	}
	store, err := disk.New(network, dataDir)
	if err != nil {
		return nil, fmt.Errorf("host-local IPAM: open store %s/%s: %w", dataDir, network, err)
	}
	h := &HostLocal{store: store, dir: filepath.Join(dataDir, network)}
	for i, cidr := range podCIDRs {
		rs := allocator.RangeSet{allocator.Range{Subnet: types.IPNet(*cidr)}}
		if err := rs.Canonicalize(); err != nil {
			store.Close()
			return nil, fmt.Errorf("host-local IPAM: podCIDR %s: %w", cidr, err)
		}
		h.ranges = append(h.ranges, rs)
		h.allocators = append(h.allocators, allocator.NewIPAllocator(&h.ranges[i], store, i))
	}
	if err := h.load(); err != nil {
		store.Close()
		return nil, err
	}
	return h, nil
}

// ownerKey is what a reservation file of the owner holds.
func ownerKey(containerID, ifName string) string {
	return strings.TrimSpace(containerID) + disk.LineBreak + ifName
}

// load rebuilds held from the reservation files.
func (h *HostLocal) load() error {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return fmt.Errorf("host-local IPAM: read store %s: %w", h.dir, err)
	}
	h.held = map[string][]net.IP{}
	for _, e := range entries {
		ip := net.ParseIP(e.Name())
		if ip == nil || !e.Type().IsRegular() {
			continue // the lock and the last_reserved_ip.N markers
		}
		data, err := os.ReadFile(filepath.Join(h.dir, e.Name()))
		if err != nil {
			return fmt.Errorf("host-local IPAM: read reservation %s: %w", e.Name(), err)
		}
		key := strings.TrimSpace(string(data))
		h.held[key] = append(h.held[key], ip)
	}
	return nil
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
	if err := h.store.Lock(); err != nil {
		return nil, fmt.Errorf("lock the IPAM store for %s: %w", owner, err)
	}
	defer h.store.Unlock()
	key := ownerKey(owner.ContainerID, owner.IfName)
	held := h.held[key]
	var ips []*current.IPConfig
	var reserved []net.IP
	for i, rs := range h.ranges {
		if ip := heldIn(rs, held); ip != nil {
			// A retried ADD (e.g. after an agent crash) gets what it already has.
			ips = append(ips, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: rs[0].Subnet.Mask}, Gateway: rs[0].Gateway})
			continue
		}
		ipc, err := h.reserve(i, owner)
		if err != nil {
			for _, ip := range reserved {
				_ = os.Remove(filepath.Join(h.dir, ip.String()))
			}
			return nil, fmt.Errorf("allocate an address in %s for %s: %w", rs.String(), owner, err)
		}
		reserved = append(reserved, ipc.Address.IP)
		ips = append(ips, ipc)
	}
	h.held[key] = append(held, reserved...)
	return ips, nil
}

// reserve takes the next free address of range i, round-robin from the last
// one reserved, as host-local does.
func (h *HostLocal) reserve(i int, owner Owner) (*current.IPConfig, error) {
	iter, err := h.allocators[i].GetIter()
	if err != nil {
		return nil, err
	}
	for {
		addr, gw := iter.Next()
		if addr == nil {
			return nil, errors.New("no address left")
		}
		ok, err := h.store.Reserve(owner.ContainerID, owner.IfName, addr.IP, strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		if ok {
			return &current.IPConfig{Address: *addr, Gateway: gw}, nil
		}
	}
}

func heldIn(rs allocator.RangeSet, held []net.IP) net.IP {
	for _, ip := range held {
		if rs.Contains(ip) {
			return ip
		}
	}
	return nil
}

// Del implements Driver.
func (h *HostLocal) Del(_ context.Context, owner Owner) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.store.Lock(); err != nil {
		return fmt.Errorf("lock the IPAM store for %s: %w", owner, err)
	}
	defer h.store.Unlock()
	key := ownerKey(owner.ContainerID, owner.IfName)
	var errs []error
	for _, ip := range h.held[key] {
		if err := os.Remove(filepath.Join(h.dir, ip.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("release the addresses of %s: %w", owner, errors.Join(errs...))
	}
	delete(h.held, key)
	return nil
}

// Check implements Driver.
func (h *HostLocal) Check(_ context.Context, owner Owner) ([]net.IP, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ips := h.held[ownerKey(owner.ContainerID, owner.IfName)]
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s: %w", owner, ErrNotAllocated)
	}
	return append([]net.IP(nil), ips...), nil
}

// GC implements Driver.
func (h *HostLocal) GC(_ context.Context, valid []types.GCAttachment) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.store.GC(valid); err != nil {
		return fmt.Errorf("garbage-collect IPAM reservations: %w", err)
	}
	return h.load()
}
