package networkpolicy

import "testing"

// A released conjunction id goes back into use only after the ids
// released before it: connections keep the ids of the rules that allowed
// them in their ct_label, and their packets count for whichever rule holds
// the id, so a rule just deleted does not hand its id to the next new rule
// while other ids are free.
func TestReleasedIDsAreReusedOldestFirst(t *testing.T) {
	a := newIDAllocator()
	var ids []uint32
	for range 4 {
		ids = append(ids, a.allocate())
	}
	if ids[0] != 1 || ids[3] != 4 {
		t.Fatalf("a fresh allocator hands out 1, 2, 3, 4; got %v", ids)
	}
	a.release(2)
	a.release(4)
	a.release(1)
	for i, want := range []uint32{2, 4, 1, 5} {
		if got := a.allocate(); got != want {
			t.Fatalf("allocation %d after releasing 2, 4, 1: got %d, want %d (the oldest released first, then a new id)", i, got, want)
		}
	}
}
