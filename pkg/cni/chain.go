package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Chaining (trafficEncapMode networkPolicyOnly): another CNI, the primary,
// owns pod networking and its network configuration is already in the
// runtime's directory (/etc/cni/net.d). Antrea adds its plugin after the
// primary's, in a conflist of its own that sorts first, so the runtime runs
// the primary and then Antrea for every pod; the primary's file is left as
// it is (uninstalling Antrea removes ChainedConfListName and the runtime
// falls back to it). This is upstream's install_cni_chaining.

// ChainedConfListName is the conflist Antrea writes when chained: "05-"
// sorts it before the primary's.
const ChainedConfListName = "05-antrea.conflist"

// OwnConfListName is the conflist Antrea writes when it is the only CNI.
const OwnConfListName = "10-antrea.conflist"

// confFileExts are the extensions libcni reads network configurations from.
var confFileExts = []string{".conflist", ".conf", ".json"}

// PrimaryConf finds the primary's network configuration in dir: the first
// file, in the runtime's (lexical) order, that is not Antrea's own.
func PrimaryConf(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || n == ChainedConfListName || n == OwnConfListName ||
			!slices.Contains(confFileExts, filepath.Ext(n)) {
			continue
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no network configuration of a primary CNI in %s (trafficEncapMode networkPolicyOnly chains Antrea after one)", dir)
	}
	sort.Strings(names)
	return filepath.Join(dir, names[0]), nil
}

// Chain returns the conflist that runs the primary's plugins (from the
// file primary, a conflist or a single plugin's conf) and then plugin.
func Chain(primary string, plugin map[string]any) ([]byte, error) {
	data, err := os.ReadFile(primary)
	if err != nil {
		return nil, err
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		return nil, fmt.Errorf("%s: not JSON: %w", primary, err)
	}
	version, _ := conf["cniVersion"].(string)
	name, _ := conf["name"].(string)
	if version == "" || name == "" {
		return nil, fmt.Errorf("%s: cniVersion and name are required", primary)
	}
	if !slices.Contains(SupportedVersions, version) {
		return nil, fmt.Errorf("%s: cniVersion %q is not one Antrea speaks (%s)", primary, version, strings.Join(SupportedVersions, ", "))
	}
	var plugins []any
	if ps, ok := conf["plugins"].([]any); ok {
		plugins = ps
	} else if _, ok := conf["type"]; ok {
		single := map[string]any{}
		for k, v := range conf {
			if k != "cniVersion" && k != "name" {
				single[k] = v
			}
		}
		plugins = []any{single}
	} else {
		return nil, fmt.Errorf("%s: neither plugins nor a type", primary)
	}
	for i, p := range plugins {
		if m, ok := p.(map[string]any); ok && m["type"] == plugin["type"] {
			return nil, fmt.Errorf("%s: plugins[%d] is already %v", primary, i, plugin["type"])
		}
	}
	out := map[string]any{"cniVersion": version, "name": name, "plugins": append(plugins, plugin)}
	return json.MarshalIndent(out, "", "  ")
}

// WriteChained writes ChainedConfListName into dir: the primary's
// configuration there with plugin after its plugins. It waits up to wait
// for the primary's file to appear (its installer may run after Antrea's).
func WriteChained(dir string, plugin map[string]any, wait time.Duration) (primary string, err error) {
	deadline := time.Now().Add(wait)
	for {
		primary, err = PrimaryConf(dir)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return "", err
	}
	data, err := Chain(primary, plugin)
	if err != nil {
		return primary, err
	}
	return primary, WriteFileAtomic(filepath.Join(dir, ChainedConfListName), append(data, '\n'))
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory and a rename: a runtime reading the directory never sees half a
// file.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	cerr := tmp.Chmod(0o644)
	if err := errors.Join(werr, cerr, tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return os.Rename(tmp.Name(), path)
}
