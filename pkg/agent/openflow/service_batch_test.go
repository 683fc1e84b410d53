package openflow

import (
	"context"
	"net/netip"
	"sort"
	"strings"
	"testing"
)

// batchState is the client's view after a sequence of installs: groups and
// flows, to compare a batch with the same changes one by one.
func batchState(c *Client) string {
	var flows []string
	for _, f := range c.Flows() {
		flows = append(flows, f.String())
	}
	return strings.Join(groupStrings(c.Groups()), "\n") + "\n" + strings.Join(sortedStrings(flows), "\n")
}

func sortedStrings(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

func TestABatchOfServicesIsOneBundleAndEndsAsTheSameInstallsOneByOne(t *testing.T) {
	other := ServicePort{IP: netip.MustParseAddr("10.96.0.11"), Protocol: 6, Port: 8080}
	third := ServicePort{IP: netip.MustParseAddr("10.96.0.12"), Protocol: 17, Port: 53}
	first := []ServiceChange{
		{"default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}},
		{"default/web2", ServiceState{other: {Endpoints: []Endpoint{ep2}}}},
	}
	// web lets go of ep1 and web2 takes it in the same batch: its DNAT flow
	// stays; web3 is new and web goes last.
	second := []ServiceChange{
		{"default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep2}}}},
		{"default/web2", ServiceState{other: {Endpoints: []Endpoint{ep1, ep2}}}},
		{"default/web3", ServiceState{third: {Endpoints: []Endpoint{ep1}}}},
		{"default/web", nil},
	}
	ctx := context.Background()
	one, _ := newServiceUnitClient(t)
	for _, batch := range [][]ServiceChange{first, second} {
		for _, ch := range batch {
			if err := one.InstallService(ctx, ch.Name, ch.Want); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, br := newServiceUnitClient(t)
	before := br.bundleCount()
	for _, batch := range [][]ServiceChange{first, second} {
		if err := c.InstallServices(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if got := br.bundleCount() - before; got != 2 {
		t.Fatalf("two batches should be two bundles, were %d", got)
	}
	if got, want := batchState(c), batchState(one); got != want {
		t.Fatalf("after the batches the client holds\n%s\none by one it holds\n%s", got, want)
	}
	if got, want := strings.Join(br.groupStrings(), "\n"), strings.Join(groupStrings(c.Groups()), "\n"); got != want {
		t.Fatalf("the switch holds groups\n%s\nthe client records\n%s", got, want)
	}
	// ep1 (local: with its hairpin flow) over TCP for web2 and UDP for
	// web3, ep2 over TCP.
	if got := endpointDNATFlows(br, c); len(got) != 5 || len(linesWith(got, "tcp,reg3=0xa0a0103")) != 2 {
		t.Fatalf("EndpointDNAT should hold ep1's TCP and UDP flows and ep2's TCP flow, has:\n%s", strings.Join(got, "\n"))
	}
}

func TestAFailedBatchLeavesNoServiceHalfInstalled(t *testing.T) {
	c, br := newServiceUnitClient(t)
	ctx := context.Background()
	other := ServicePort{IP: netip.MustParseAddr("10.96.0.11"), Protocol: 6, Port: 8080}
	if err := c.InstallService(ctx, "default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
		t.Fatal(err)
	}
	want := batchState(c)
	switchGroups := strings.Join(br.groupStrings(), "\n")
	// The switch lost web's group behind the client's back: the batch's
	// modify of it fails, and with it the new Service in the same bundle.
	br.mu.Lock()
	lost := br.groups[1]
	delete(br.groups, 1)
	br.mu.Unlock()
	batch := []ServiceChange{
		{"default/web2", ServiceState{other: {Endpoints: []Endpoint{ep2}}}},
		{"default/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1, ep2}}}},
	}
	if err := c.InstallServices(ctx, batch); err == nil {
		t.Fatal("the batch should fail")
	}
	if got := batchState(c); got != want {
		t.Fatalf("after a failed batch the client should record what it did before:\n%s\nit records\n%s", want, got)
	}
	// A refused Service (its port is another's) fails the batch before
	// anything is written.
	br.mu.Lock()
	br.groups[1] = lost
	br.mu.Unlock()
	n := br.bundleCount()
	refused := []ServiceChange{
		{"default/web2", ServiceState{other: {Endpoints: []Endpoint{ep2}}}},
		{"default/thief", ServiceState{webTCP: {Endpoints: []Endpoint{ep2}}}},
	}
	if err := c.InstallServices(ctx, refused); err == nil {
		t.Fatal("a batch with a port claimed by another Service should be refused")
	}
	if br.bundleCount() != n || batchState(c) != want || strings.Join(br.groupStrings(), "\n") != switchGroups {
		t.Fatal("a refused batch should write nothing and change no record")
	}
	// The retry of the same batch, with the switch whole again, installs both.
	if err := c.InstallServices(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if g := br.groupStrings(); len(g) != 2 || strings.Count(strings.Join(g, "\n"), "bucket=") != 3 {
		t.Fatalf("the retried batch should leave two groups with three buckets, has %q", g)
	}
}
