package ipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
)

func cidrs(t *testing.T, ss ...string) []*net.IPNet {
	t.Helper()
	var out []*net.IPNet
	for _, s := range ss {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func newHostLocal(t *testing.T, dir string, cs ...string) *HostLocal {
	t.Helper()
	h, err := NewHostLocal("antrea", dir, cidrs(t, cs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func owner(i int) Owner {
	return Owner{ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0", PodNamespace: "ns", PodName: fmt.Sprintf("p%d", i)}
}

func TestTheFirstPodGetsTheSecondAddressAndTheFirstIsTheGateway(t *testing.T) {
	h := newHostLocal(t, t.TempDir(), "10.1.2.0/24", "fd00:1::/64")
	ips, err := h.Add(context.Background(), owner(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ addr, gw string }{{"10.1.2.2/24", "10.1.2.1"}, {"fd00:1::2/64", "fd00:1::1"}}
	if len(ips) != len(want) {
		t.Fatalf("got %d addresses, want %d", len(ips), len(want))
	}
	for i, w := range want {
		if ips[i].Address.String() != w.addr || ips[i].Gateway.String() != w.gw {
			t.Errorf("address %d = %s via %s, want %s via %s", i, ips[i].Address.String(), ips[i].Gateway, w.addr, w.gw)
		}
	}
	if gws := h.Gateways(); gws[0].String() != "10.1.2.1" || gws[1].String() != "fd00:1::1" {
		t.Errorf("Gateways() = %v", gws)
	}
}

func TestARetriedAddReturnsTheSameAddress(t *testing.T) {
	h := newHostLocal(t, t.TempDir(), "10.1.2.0/24")
	a, err := h.Add(context.Background(), owner(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.Add(context.Background(), owner(1))
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Address.String() != b[0].Address.String() {
		t.Errorf("retried ADD got %s, first got %s", b[0].Address.String(), a[0].Address.String())
	}
}

func TestReservationsSurviveARestartAndDelReleasesThem(t *testing.T) {
	dir := t.TempDir()
	h := newHostLocal(t, dir, "10.1.2.0/24")
	if _, err := h.Add(context.Background(), owner(1)); err != nil {
		t.Fatal(err)
	}
	h.Close()

	h2 := newHostLocal(t, dir, "10.1.2.0/24")
	ips, err := h2.Check(context.Background(), owner(1))
	if err != nil || len(ips) != 1 || ips[0].String() != "10.1.2.2" {
		t.Fatalf("Check after restart = %v, %v; want 10.1.2.2", ips, err)
	}
	next, err := h2.Add(context.Background(), owner(2))
	if err != nil || next[0].Address.IP.String() != "10.1.2.3" {
		t.Fatalf("next pod after restart got %v, %v; want 10.1.2.3", next, err)
	}
	for i := 0; i < 2; i++ { // twice: releasing nothing is fine
		if err := h2.Del(context.Background(), owner(1)); err != nil {
			t.Fatalf("Del %d: %v", i, err)
		}
	}
	if _, err := h2.Check(context.Background(), owner(1)); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("Check after Del = %v, want ErrNotAllocated", err)
	}
}

func TestGCReleasesOnlyAddressesOfAttachmentsNotInTheValidList(t *testing.T) {
	h := newHostLocal(t, t.TempDir(), "10.1.2.0/24")
	for i := 1; i <= 3; i++ {
		if _, err := h.Add(context.Background(), owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.GC(context.Background(), []types.GCAttachment{{ContainerID: "c2", IfName: "eth0"}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]bool{1: false, 2: true, 3: false} {
		_, err := h.Check(context.Background(), owner(i))
		if got := err == nil; got != want {
			t.Errorf("pod %d holds an address after GC: %v, want %v", i, got, want)
		}
	}
}

func TestConcurrentAddsNeverShareAnAddressAndAFullRangeIsAnError(t *testing.T) {
	h := newHostLocal(t, t.TempDir(), "10.1.2.0/27") // 29 usable addresses: .2-.30
	const n = 29
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ips, err := h.Add(context.Background(), owner(i))
			errs[i] = err
			if err == nil {
				got[i] = ips[0].Address.IP.String()
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("pod %d: %v", i, errs[i])
		}
		if seen[got[i]] {
			t.Errorf("%s handed out twice", got[i])
		}
		seen[got[i]] = true
	}
	if _, err := h.Add(context.Background(), owner(n)); err == nil {
		t.Errorf("ADD in a full range succeeded")
	}
}

func TestAHostLocalDriverNeedsAPodCIDR(t *testing.T) {
	if _, err := NewHostLocal("antrea", t.TempDir(), nil); err == nil {
		t.Error("NewHostLocal without podCIDR succeeded")
	}
}

func TestReservationsAreInTheReferencePluginsFormatBothWays(t *testing.T) {
	dir := t.TempDir()
	cidr := cidrs(t, "10.1.2.0/24")
	// Written by the reference plugin's allocator before the agent starts...
	store, err := disk.New("antrea", dir)
	if err != nil {
		t.Fatal(err)
	}
	rs := allocator.RangeSet{allocator.Range{Subnet: types.IPNet(*cidr[0])}}
	if err := rs.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	ref := allocator.NewIPAllocator(&rs, store, 0)
	old, err := ref.Get("c-old", "eth0", nil)
	if err != nil {
		t.Fatal(err)
	}
	// ... it is known to the agent's driver after a start.
	h := newHostLocal(t, dir, "10.1.2.0/24")
	ips, err := h.Check(context.Background(), Owner{ContainerID: "c-old", IfName: "eth0"})
	if err != nil || len(ips) != 1 || !ips[0].Equal(old.Address.IP) {
		t.Errorf("driver sees %v, %v; want %s", ips, err, old.Address.IP)
	}
	// And what the driver reserves, the reference plugin sees.
	got, err := h.Add(context.Background(), owner(7))
	if err != nil {
		t.Fatal(err)
	}
	if seen := store.GetByID("c7", "eth0"); len(seen) != 1 || !seen[0].Equal(got[0].Address.IP) {
		t.Errorf("reference store sees %v for c7, want %s", seen, got[0].Address.IP)
	}
	if got[0].Address.IP.Equal(old.Address.IP) {
		t.Errorf("driver handed out %s, which the reference allocator holds", old.Address.IP)
	}
	store.Close()
}

// BenchmarkHostLocalAddDel measures one allocation and release with 200
// other pods holding addresses.
func BenchmarkHostLocalAddDel(b *testing.B) {
	_, n, _ := net.ParseCIDR("10.1.0.0/16")
	h, err := NewHostLocal("antrea", b.TempDir(), []*net.IPNet{n})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for i := 0; i < 200; i++ {
		if _, err := h.Add(context.Background(), owner(1000+i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Add(context.Background(), owner(i)); err != nil {
			b.Fatal(err)
		}
		if err := h.Del(context.Background(), owner(i)); err != nil {
			b.Fatal(err)
		}
	}
}
