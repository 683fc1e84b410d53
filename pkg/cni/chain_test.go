package cni

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var antreaPlugin = map[string]any{"type": "antrea", "ipam": map[string]any{"type": "host-local"}}

// networkPolicyOnly's install step (antrea-cni chain): the primary's
// configuration, a conflist or a single plugin's conf, found in the
// runtime's order among the directory's files, gets Antrea's plugin after
// its own, in a file that sorts first; what cannot be chained is refused
// naming the file and why.
func TestChainPutsAntreaAfterThePrimarysPlugins(t *testing.T) {
	write := func(t *testing.T, dir, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a conflist", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "10-ptp.conflist", `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"ptp"},{"type":"portmap"}]}`)
		write(t, dir, "99-other.conflist", `{"cniVersion":"1.0.0","name":"later","plugins":[{"type":"bridge"}]}`)
		write(t, dir, ".hidden.conflist", `not json`)
		write(t, dir, OwnConfListName, `{"cniVersion":"1.1.0","name":"antrea","plugins":[{"type":"antrea"}]}`)
		primary, err := WriteChained(dir, antreaPlugin, 0)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(primary) != "10-ptp.conflist" {
			t.Fatalf("primary %s, want 10-ptp.conflist (the first in the runtime's order that is not Antrea's)", primary)
		}
		got := readConf(t, filepath.Join(dir, ChainedConfListName))
		if got.CNIVersion != "1.0.0" || got.Name != "k8s" || strings.Join(got.types(), ",") != "ptp,portmap,antrea" {
			t.Fatalf("chained conflist %+v, want k8s 1.0.0 with ptp, portmap, antrea", got)
		}
		if ChainedConfListName >= "10-ptp.conflist" {
			t.Fatalf("%s does not sort before the primary's file", ChainedConfListName)
		}
	})
	t.Run("a single plugin's conf", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "20-aws.conf", `{"cniVersion":"0.4.0","name":"aws-cni","type":"aws-cni","vethPrefix":"eni"}`)
		if _, err := WriteChained(dir, antreaPlugin, 0); err != nil {
			t.Fatal(err)
		}
		got := readConf(t, filepath.Join(dir, ChainedConfListName))
		if got.CNIVersion != "0.4.0" || strings.Join(got.types(), ",") != "aws-cni,antrea" || got.Plugins[0]["vethPrefix"] != "eni" {
			t.Fatalf("chained conflist %+v, want aws-cni (with its settings) then antrea", got)
		}
	})
	for _, tc := range []struct{ name, file, content, want string }{
		{"no primary", "", "", "no network configuration of a primary CNI"},
		{"not JSON", "10-x.conflist", "{", "10-x.conflist: not JSON"},
		{"no name", "10-x.conflist", `{"cniVersion":"1.0.0","plugins":[]}`, "cniVersion and name are required"},
		{"a version Antrea does not speak", "10-x.conflist", `{"cniVersion":"0.2.0","name":"x","plugins":[{"type":"ptp"}]}`, `cniVersion "0.2.0" is not one Antrea speaks`},
		{"already chained", "10-x.conflist", `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"ptp"},{"type":"antrea"}]}`, "plugins[1] is already antrea"},
		{"neither plugins nor type", "10-x.conf", `{"cniVersion":"1.0.0","name":"x"}`, "neither plugins nor a type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				write(t, dir, tc.file, tc.content)
			}
			_, err := WriteChained(dir, antreaPlugin, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteChained = %v, want an error with %q", err, tc.want)
			}
			if _, serr := os.Stat(filepath.Join(dir, ChainedConfListName)); serr == nil {
				t.Fatalf("%s written although chaining failed", ChainedConfListName)
			}
		})
	}
	t.Run("waits for the primary", func(t *testing.T) {
		dir := t.TempDir()
		go func() {
			time.Sleep(300 * time.Millisecond)
			write(t, dir, "10-late.conflist", `{"cniVersion":"1.0.0","name":"late","plugins":[{"type":"ptp"}]}`)
		}()
		if _, err := WriteChained(dir, antreaPlugin, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

type confList struct {
	CNIVersion string           `json:"cniVersion"`
	Name       string           `json:"name"`
	Plugins    []map[string]any `json:"plugins"`
}

func (c confList) types() []string {
	var out []string
	for _, p := range c.Plugins {
		s, _ := p["type"].(string)
		out = append(out, s)
	}
	return out
}

func readConf(t *testing.T, path string) confList {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c confList
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}
