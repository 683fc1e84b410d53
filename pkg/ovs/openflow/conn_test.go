package openflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestHandshakeNegotiatesTheVersionBothSidesSpeak(t *testing.T) {
	_, mgmt := startBridge(t)
	tests := []struct {
		name   string
		offer  []uint8
		expect uint8
	}{
		{"offering 1.5 and 1.3 picks 1.5", []uint8{Version15, Version13}, Version15},
		{"offering only 1.3 picks 1.3", []uint8{Version13}, Version13},
		{"offering only 1.5 picks 1.5", []uint8{Version15}, Version15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dialForTest(t, "unix:"+mgmt, Options{Versions: tc.offer})
			if c.Version() != tc.expect {
				t.Fatalf("negotiated %#x, want %#x", c.Version(), tc.expect)
			}
			if c.Features().NTables == 0 || c.Features().DatapathID == 0 {
				t.Fatalf("features reply not decoded: %+v", c.Features())
			}
			if err := c.Echo(testCtx(t)); err != nil {
				t.Fatalf("echo: %v", err)
			}
			if err := c.Barrier(testCtx(t)); err != nil {
				t.Fatalf("barrier: %v", err)
			}
		})
	}
}

func TestHandshakeFailsWhenTheBridgeSpeaksNoCommonVersion(t *testing.T) {
	in, mgmt := startBridge(t)
	if _, err := in.Vsctl("set", "bridge", testBridge, "protocols=OpenFlow10"); err != nil {
		t.Fatal(err)
	}
	_, err := Dial(testCtx(t), mgmt, Options{})
	if err == nil {
		t.Fatal("dial should fail against an OpenFlow 1.0-only bridge")
	}
	t.Logf("dial error: %v", err)
}

func TestApplyNamesTheMessageTheSwitchRejected(t *testing.T) {
	in, mgmt := startBridge(t)
	c := dialForTest(t, mgmt, Options{})
	good := addIPFlow(0, 0x1, 0, 1, 1)
	bad := addIPFlow(0, 0x1, 0, 2, 0xffffff00) // OFPP_MAX is not an output port
	err := c.Apply(testCtx(t), good, bad)
	var oe *Error
	if !errors.As(err, &oe) {
		t.Fatalf("want *Error, got %v", err)
	}
	if oe.Name() != "OFPBAC_BAD_OUT_PORT" || !strings.Contains(err.Error(), bad.text) || !strings.Contains(err.Error(), "OFPBAC_BAD_OUT_PORT") {
		t.Fatalf("error should name OFPBAC_BAD_OUT_PORT and the flow %q: %v", bad.text, err)
	}
	if !IsErrorCode(err, ErrTypeBadAction, 4) {
		t.Fatalf("IsErrorCode should see OFPBAC_BAD_OUT_PORT in %v", err)
	}
	// Apply is not atomic: the good flow is there.
	if flows := dumpFlows(t, in); len(flows) != 1 || !strings.Contains(flows[0], "nw_src=10.0.0.1") {
		t.Fatalf("want only the good flow, got %q", flows)
	}
}

func TestBundleWithOneInvalidFlowChangesNothing(t *testing.T) {
	for _, version := range []uint8{Version15, Version13} {
		t.Run(fmt.Sprintf("over OpenFlow version %#x", version), func(t *testing.T) {
			in, mgmt := startBridge(t)
			c := dialForTest(t, mgmt, Options{Versions: []uint8{version}})
			ctx := testCtx(t)
			if err := c.Bundle(ctx, addIPFlow(0, 0x10, 9, 9, 1)); err != nil {
				t.Fatalf("a valid bundle should commit: %v", err)
			}
			before := dumpFlows(t, in)

			t.Run("a flow the switch cannot decode discards the bundle", func(t *testing.T) {
				var msgs []Message
				for i := range 50 {
					msgs = append(msgs, addIPFlow(0, 0x20, 1, byte(i), 1))
				}
				bad := addIPFlow(0, 0x20, 2, 1, 0xffffff00)
				msgs = slices.Insert(msgs, 25, Message(bad))
				err := c.Bundle(ctx, msgs...)
				var be *BundleError
				if !errors.As(err, &be) || len(be.Failed) != 1 {
					t.Fatalf("want a BundleError with one failed message, got %v", err)
				}
				if !strings.Contains(err.Error(), bad.text) || !strings.Contains(err.Error(), "OFPBAC_BAD_OUT_PORT") {
					t.Fatalf("error should name the failed flow %q and OFPBAC_BAD_OUT_PORT: %v", bad.text, err)
				}
				if after := dumpFlows(t, in); !slices.Equal(before, after) {
					t.Fatalf("flows changed:\nbefore %q\nafter  %q", before, after)
				}
			})

			t.Run("a flow that fails at commit rolls the bundle back", func(t *testing.T) {
				// check_overlap fails only when the switch applies the flow.
				// "ip" at the priority of the committed nw_src=10.0.9.9 flow overlaps it.
				overlap := flowMod("cookie=0x30, table=0, priority=100,ip check_overlap actions=output:2",
					ofpfcAdd, 0, 100, 0x30, 0, ofpffCheckOverlap, oxmEthType(0x0800), instApply(actOutput(2)))
				msgs := []Message{addIPFlow(0, 0x30, 3, 1, 1), addIPFlow(0, 0x30, 3, 2, 1), overlap, addIPFlow(0, 0x30, 3, 3, 1)}
				err := c.Bundle(ctx, msgs...)
				var be *BundleError
				if !errors.As(err, &be) || len(be.Failed) != 1 {
					t.Fatalf("want a BundleError with one failed message, got %v", err)
				}
				if !strings.Contains(err.Error(), overlap.text) || !strings.Contains(err.Error(), "OFPFMFC_OVERLAP") {
					t.Fatalf("error should name the failed flow %q and OFPFMFC_OVERLAP: %v", overlap.text, err)
				}
				if after := dumpFlows(t, in); !slices.Equal(before, after) {
					t.Fatalf("flows changed:\nbefore %q\nafter  %q", before, after)
				}
			})

			t.Run("the connection stays usable", func(t *testing.T) {
				if err := c.Bundle(ctx, addIPFlow(0, 0x40, 4, 1, 1)); err != nil {
					t.Fatal(err)
				}
				if n := len(dumpFlows(t, in)); n != len(before)+1 {
					t.Fatalf("want %d flows, got %d", len(before)+1, n)
				}
			})
		})
	}
}

func TestDeleteByCookieRemovesExactlyThoseFlows(t *testing.T) {
	in, mgmt := startBridge(t)
	c := dialForTest(t, mgmt, Options{})
	ctx := testCtx(t)
	var msgs []Message
	for i := range 30 {
		// Cookies 0x100..0x102 in the high bits with a low "version" byte.
		msgs = append(msgs, addIPFlow(uint8(i%3), uint64(0x100+i%3)<<8|uint64(i%2), 5, byte(i), 1))
	}
	if err := c.Bundle(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := c.Bundle(ctx, deleteByCookie(0x101<<8, 0xffffff00)); err != nil {
		t.Fatal(err)
	}
	body, err := c.FlowStatsRaw(ctx, FlowStatsRequest{TableID: TableAll})
	if err != nil {
		t.Fatal(err)
	}
	cookies := flowStatsCookies(t, c.Version(), body)
	if len(cookies) != 20 {
		t.Fatalf("want 20 flows left, got %d", len(cookies))
	}
	for _, ck := range cookies {
		if ck>>8 == 0x101 {
			t.Fatalf("flow with cookie %#x survived the delete", ck)
		}
	}
	if n := len(dumpFlows(t, in)); n != 20 {
		t.Fatalf("ovs-ofctl sees %d flows, want 20", n)
	}
}

func TestFlowStatsSelectByTableAndCookie(t *testing.T) {
	_, mgmt := startBridge(t)
	for _, version := range []uint8{Version15, Version13} {
		c := dialForTest(t, mgmt, Options{Versions: []uint8{version}})
		ctx := testCtx(t)
		if err := c.Bundle(ctx, deleteByCookie(0, 0)); err != nil {
			t.Fatal(err)
		}
		var msgs []Message
		for i := range 3000 { // enough to need several reply parts
			msgs = append(msgs, addIPFlow(uint8(i%2), uint64(i%5), byte(i>>8), byte(i), 1))
		}
		if err := c.Bundle(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			req  FlowStatsRequest
			want int
		}{
			{"every table returns every flow", FlowStatsRequest{TableID: TableAll}, 3000},
			{"one table returns its flows", FlowStatsRequest{TableID: 1}, 1500},
			{"a cookie selects its flows", FlowStatsRequest{TableID: TableAll, Cookie: 3, CookieMask: ^uint64(0)}, 600},
			{"table and cookie combine", FlowStatsRequest{TableID: 0, Cookie: 2, CookieMask: ^uint64(0)}, 300},
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s (version %#x)", tc.name, version), func(t *testing.T) {
				body, err := c.FlowStatsRaw(ctx, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				cookies := flowStatsCookies(t, version, body)
				if len(cookies) != tc.want {
					t.Fatalf("got %d flows, want %d", len(cookies), tc.want)
				}
				for _, ck := range cookies {
					if tc.req.CookieMask != 0 && ck != tc.req.Cookie {
						t.Fatalf("flow with cookie %d returned for cookie %d", ck, tc.req.Cookie)
					}
				}
			})
		}
	}
}
