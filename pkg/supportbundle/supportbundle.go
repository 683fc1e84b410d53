// Package supportbundle collects what a bug report about an Antrea component
// needs into one tar.gz: its version, its configuration, its log files (the
// tail of each), and, on a node, the bridge's flows and groups, an OVSDB
// dump, the kernel's addresses, routes, rules and links, the iptables and
// nftables rules, the conntrack counts, and the component's goroutine and
// heap profiles when it runs in the component's process. Everything written
// goes through Redact first, so bearer tokens, passwords, private keys and
// kubeconfig credentials never reach the bundle. The tarball ends with
// summary.json (Summary): what each entry holds and what could not be
// collected, and why.
//
// antctl supportbundle (pkg/antctl) uses it in the agent container
// (`antctl supportbundle --local`) and from a laptop for every component.
package supportbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultTailBytes is how much of the end of each log file a bundle keeps.
const DefaultTailBytes = 2 << 20

// SummaryName is the bundle's last entry.
const SummaryName = "summary.json"

// Item says what one entry holds, or why it is missing.
type Item struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Truncated: a log file of which only the tail was kept.
	Truncated bool `json:"truncated,omitempty"`
	// Redacted counts the secrets replaced in the entry.
	Redacted int    `json:"redacted,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Summary describes a bundle.
type Summary struct {
	Component string    `json:"component"`
	Node      string    `json:"node,omitempty"`
	Version   string    `json:"version,omitempty"`
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	Items     []Item    `json:"items"`
}

// Failed lists the items that could not be collected.
func (s *Summary) Failed() []Item {
	var out []Item
	for _, it := range s.Items {
		if it.Error != "" {
			out = append(out, it)
		}
	}
	return out
}

// Command is a program whose output becomes an entry.
type Command struct {
	Name string
	Argv []string
	Env  []string
}

// Func writes an entry.
type Func struct {
	Name  string
	Write func(ctx context.Context, w io.Writer) error
}

// Collector is what one component's bundle holds.
type Collector struct {
	Component, Node, Version string
	// ConfigFiles are copied under config/, redacted.
	ConfigFiles []string
	// LogGlobs select log files, copied under logs/ (the last TailBytes of
	// each) with their path below the glob's fixed prefix.
	LogGlobs  []string
	TailBytes int64
	// LogsSince, when set, leaves out the log files not written since then
	// (their modification time; upstream antctl's --since).
	LogsSince time.Time
	// Files are small files (/proc counters) copied as they are.
	Files map[string]string // entry name -> path
	// Commands and Funcs make the other entries.
	Commands []Command
	Funcs    []Func
	// CommandTimeout bounds each command and func (default 30 s).
	CommandTimeout time.Duration
	// Now and Run are the clock and the command runner (tests replace them).
	Now func() time.Time
	Run func(ctx context.Context, env []string, argv ...string) ([]byte, error)
}

func runCommand(ctx context.Context, env []string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, lastLines(msg, 3))
		}
		return out, err
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// Bundle is a tar.gz being written.
type Bundle struct {
	gz      *gzip.Writer
	tw      *tar.Writer
	summary *Summary
	now     func() time.Time
}

// NewBundle starts a bundle on w.
func NewBundle(w io.Writer, s *Summary, now func() time.Time) *Bundle {
	if now == nil {
		now = time.Now
	}
	gz := gzip.NewWriter(w)
	return &Bundle{gz: gz, tw: tar.NewWriter(gz), summary: s, now: now}
}

// Add writes an entry, redacted, and records it.
func (b *Bundle) Add(name string, data []byte, truncated bool) error {
	red, n := Redact(data)
	it := Item{Name: name, Bytes: int64(len(red)), Truncated: truncated, Redacted: n}
	b.summary.Items = append(b.summary.Items, it)
	return b.write(name, red)
}

// Fail records an entry that could not be collected, with what was read
// of it (a command's partial output), if anything.
func (b *Bundle) Fail(name string, partial []byte, err error) error {
	red, n := Redact(partial)
	b.summary.Items = append(b.summary.Items, Item{Name: name, Bytes: int64(len(red)), Redacted: n, Error: err.Error()})
	if len(red) == 0 {
		return nil
	}
	return b.write(name, red)
}

func (b *Bundle) write(name string, data []byte) error {
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: b.now(), Typeflag: tar.TypeReg}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := b.tw.Write(data)
	return err
}

// Close writes summary.json and ends the tarball.
func (b *Bundle) Close() error {
	b.summary.Seconds = b.now().Sub(b.summary.Started).Seconds()
	js, err := json.MarshalIndent(b.summary, "", "  ")
	if err != nil {
		return err
	}
	if err := b.write(SummaryName, append(js, '\n')); err != nil {
		return err
	}
	if err := b.tw.Close(); err != nil {
		return err
	}
	return b.gz.Close()
}

// Collect writes the bundle to w. An entry that cannot be collected is
// recorded in the summary; only a failure to write w is an error.
func (c *Collector) Collect(ctx context.Context, w io.Writer) (*Summary, error) {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	run := c.Run
	if run == nil {
		run = runCommand
	}
	timeout := c.CommandTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	tail := c.TailBytes
	if tail == 0 {
		tail = DefaultTailBytes
	}
	s := &Summary{Component: c.Component, Node: c.Node, Version: c.Version, Started: now()}
	b := NewBundle(w, s, now)
	if c.Version != "" {
		if err := b.Add("version.txt", []byte(c.Version+"\n"), false); err != nil {
			return s, err
		}
	}
	for _, f := range c.ConfigFiles {
		name := "config/" + filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			if werr := b.Fail(name, nil, err); werr != nil {
				return s, werr
			}
			continue
		}
		if err := b.Add(name, data, false); err != nil {
			return s, err
		}
	}
	anyLog := false
	for _, g := range c.LogGlobs {
		matches, err := filepath.Glob(g)
		if err != nil {
			if werr := b.Fail("logs/"+filepath.Base(g), nil, err); werr != nil {
				return s, werr
			}
			continue
		}
		anyLog = anyLog || len(matches) > 0
		sort.Strings(matches)
		prefix := globPrefix(g)
		for _, m := range matches {
			st, err := os.Stat(m)
			if err != nil || !st.Mode().IsRegular() || st.ModTime().Before(c.LogsSince) {
				continue
			}
			rel, _ := filepath.Rel(prefix, m)
			name := "logs/" + filepath.ToSlash(rel)
			data, truncated, err := tailFile(m, tail)
			if err != nil {
				if werr := b.Fail(name, nil, err); werr != nil {
					return s, werr
				}
				continue
			}
			if err := b.Add(name, data, truncated); err != nil {
				return s, err
			}
		}
	}
	if len(c.LogGlobs) > 0 && !anyLog {
		if werr := b.Fail("logs/", nil, fmt.Errorf("no log file matches %s", strings.Join(c.LogGlobs, ", "))); werr != nil {
			return s, werr
		}
	}
	names := make([]string, 0, len(c.Files))
	for n := range c.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := os.ReadFile(c.Files[n])
		if err != nil {
			if werr := b.Fail(n, nil, err); werr != nil {
				return s, werr
			}
			continue
		}
		if err := b.Add(n, data, false); err != nil {
			return s, err
		}
	}
	for _, cmd := range c.Commands {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		out, err := run(cctx, cmd.Env, cmd.Argv...)
		cancel()
		if err != nil {
			if werr := b.Fail(cmd.Name, out, fmt.Errorf("%s: %w", strings.Join(cmd.Argv, " "), err)); werr != nil {
				return s, werr
			}
			continue
		}
		if err := b.Add(cmd.Name, out, false); err != nil {
			return s, err
		}
	}
	for _, f := range c.Funcs {
		var buf bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := f.Write(cctx, &buf)
		cancel()
		if err != nil {
			if werr := b.Fail(f.Name, buf.Bytes(), err); werr != nil {
				return s, werr
			}
			continue
		}
		if err := b.Add(f.Name, buf.Bytes(), false); err != nil {
			return s, err
		}
	}
	return s, b.Close()
}

// globPrefix is the directory part of a glob before its first wildcard.
func globPrefix(g string) string {
	dir := filepath.Dir(g)
	for strings.ContainsAny(dir, "*?[") {
		dir = filepath.Dir(dir)
	}
	return dir
}

// tailFile reads the last n bytes of a file, from the start of a line.
func tailFile(path string, n int64) ([]byte, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if st.Size() <= n {
		data, err := io.ReadAll(f)
		return data, false, err
	}
	if _, err := f.Seek(st.Size()-n, io.SeekStart); err != nil {
		return nil, false, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, false, err
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 && i < len(data)-1 {
		data = data[i+1:]
	}
	return data, true, nil
}

// Extend copies the bundle read from r to w, adds entries (redacted), and
// rewrites summary.json with them: antctl adds what only the API can give
// (the component's pod logs, its profiles) to the bundle an agent made.
func Extend(r io.Reader, w io.Writer, add func(b *Bundle) error, now func() time.Time) (*Summary, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading the bundle: %w", err)
	}
	tr := tar.NewReader(gz)
	var s Summary
	var entries []struct {
		hdr  *tar.Header
		data []byte
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the bundle: %w", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading the bundle: %w", err)
		}
		if hdr.Name == SummaryName {
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, fmt.Errorf("reading the bundle's summary: %w", err)
			}
			continue
		}
		entries = append(entries, struct {
			hdr  *tar.Header
			data []byte
		}{hdr, data})
	}
	if s.Component == "" {
		return nil, fmt.Errorf("reading the bundle: no %s (cut short?)", SummaryName)
	}
	if now == nil {
		now = time.Now
	}
	started, secs := s.Started, s.Seconds
	b := NewBundle(w, &s, now)
	for _, e := range entries {
		if err := b.tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		if _, err := b.tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	addStart := now()
	if err := add(b); err != nil {
		return nil, err
	}
	s.Started = started
	// The collection's own time plus what adding took.
	b.now = func() time.Time { return started.Add(time.Duration(secs*float64(time.Second)) + now().Sub(addStart)) }
	return &s, b.Close()
}

// Read returns the entries of a bundle by name (tests and tools).
func Read(r io.Reader) (map[string][]byte, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return out, err
		}
		out[hdr.Name] = data
	}
}
