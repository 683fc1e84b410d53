// Package kernelconfig tells whether the running kernel has a feature: from
// its build configuration (/proc/config.gz, CONFIG_* = y or m) and, when
// that file is absent, from what /sys/module and the modules directory
// show. Features the agent needs and the kernel lacks are refused at start
// with the option named (trafficEncryptionMode: ipsec needs CONFIG_INET_ESP).
package kernelconfig

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Paths are where the kernel's facts are read (the host's by default; a
// test gives its own).
type Paths struct {
	// Config is the gzipped build configuration (/proc/config.gz).
	Config string
	// SysModule is /sys/module (loaded and built-in modules with
	// parameters).
	SysModule string
	// Modules is the running kernel's modules directory
	// (/lib/modules/$(uname -r)).
	Modules string
}

// Host are the running kernel's paths.
func Host() Paths {
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return Paths{Config: "/proc/config.gz", SysModule: "/sys/module",
		Modules: filepath.Join("/lib/modules", strings.TrimSpace(string(release)))}
}

// Answer is whether the kernel has a feature and how that was found.
type Answer struct {
	Has bool
	// Evidence says where the answer comes from, for an error message.
	Evidence string
}

// ErrUnknown: neither the configuration nor the modules tell.
var ErrUnknown = errors.New("cannot tell")

// Has tells whether option (CONFIG_INET_ESP) is built in or a module; module
// is the module's name (esp4) for the fallbacks.
func (p Paths) Has(option, module string) (Answer, error) {
	if v, err := p.configValue(option); err == nil {
		switch v {
		case "y", "m":
			return Answer{Has: true, Evidence: fmt.Sprintf("%s: %s=%s", p.Config, option, v)}, nil
		default:
			return Answer{Evidence: fmt.Sprintf("%s: %s is not set", p.Config, option)}, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Answer{}, err
	}
	if _, err := os.Stat(filepath.Join(p.SysModule, module)); err == nil {
		return Answer{Has: true, Evidence: fmt.Sprintf("%s exists", filepath.Join(p.SysModule, module))}, nil
	}
	found := false
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		data, err := os.ReadFile(filepath.Join(p.Modules, f))
		if err != nil {
			continue
		}
		found = true
		for _, line := range strings.Split(string(data), "\n") {
			name, _, _ := strings.Cut(line, ":")
			if strings.TrimSuffix(filepath.Base(strings.TrimSpace(name)), ".ko") == module ||
				strings.HasPrefix(filepath.Base(strings.TrimSpace(name)), module+".ko") {
				return Answer{Has: true, Evidence: fmt.Sprintf("%s lists %s", filepath.Join(p.Modules, f), module)}, nil
			}
		}
	}
	if found {
		return Answer{Evidence: fmt.Sprintf("no %s (no %s, and %s lists no %s module)", p.Config,
			filepath.Join(p.SysModule, module), p.Modules, module)}, nil
	}
	return Answer{}, fmt.Errorf("%s: %w (no %s, %s or %s)", option, ErrUnknown, p.Config, filepath.Join(p.SysModule, module), p.Modules)
}

// configValue reads option's value from the gzipped configuration: "y",
// "m", a string, or "" when it is "not set" or absent.
func (p Paths) configValue(option string) (string, error) {
	f, err := os.Open(p.Config)
	if err != nil {
		return "", err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Config, err)
	}
	defer z.Close()
	sc := bufio.NewScanner(io.LimitReader(z, 64<<20))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, option+"="); ok {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", p.Config, err)
	}
	return "", nil
}
