package cniserver

import (
	"encoding/json"
	"strings"
	"testing"
)

// A chained ADD reads the primary's result (prevResult); one that does not
// say where the pod is plugged is refused naming what is missing.
func TestAChainedAddRefusesAPrevResultThatDoesNotNameThePodsVeth(t *testing.T) {
	good := `{"cniVersion":"1.0.0","interfaces":[{"name":"veth1234"},{"name":"eth0","mac":"0a:58:0a:0a:00:05","sandbox":"/var/run/netns/p"}],` +
		`"ips":[{"address":"10.10.0.5/24","gateway":"10.10.0.1","interface":1}]}`
	for _, tc := range []struct {
		name, prev, want string
	}{
		{"the primary's result", good, ""},
		{"no prevResult", "", "prevResult is missing"},
		{"no host end", `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:0a:00:05","sandbox":"/var/run/netns/p"}],"ips":[{"address":"10.10.0.5/24","interface":0}]}`,
			"prevResult names no host interface"},
		{"no pod interface of that name", `{"cniVersion":"1.0.0","interfaces":[{"name":"veth1"},{"name":"net1","mac":"0a:58:0a:0a:00:05","sandbox":"/p"}],"ips":[{"address":"10.10.0.5/24","interface":1}]}`,
			"prevResult names no interface eth0"},
		{"a bad MAC", `{"cniVersion":"1.0.0","interfaces":[{"name":"veth1"},{"name":"eth0","mac":"not-a-mac","sandbox":"/p"}],"ips":[{"address":"10.10.0.5/24","interface":1}]}`,
			`interfaces[1].mac "not-a-mac"`},
		{"no address for the pod", `{"cniVersion":"1.0.0","interfaces":[{"name":"veth1"},{"name":"eth0","mac":"0a:58:0a:0a:00:05","sandbox":"/p"}],"ips":[{"address":"10.10.0.5/24","interface":0}]}`,
			"prevResult gives eth0 no address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &request{IfName: "eth0"}
			r.Conf.CNIVersion = "1.0.0"
			if tc.prev != "" {
				if err := json.Unmarshal([]byte(tc.prev), &r.Conf.RawPrevResult); err != nil {
					t.Fatal(err)
				}
			}
			p, err := parseChained(r)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p.host != "veth1234" || p.podMAC.String() != "0a:58:0a:0a:00:05" || len(p.ips) != 1 || p.ips[0].String() != "10.10.0.5" {
					t.Fatalf("parsed %+v, want host veth1234, the pod's MAC and 10.10.0.5", p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseChained = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
