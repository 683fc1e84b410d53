package antctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
	"antrea.io/antrea/pkg/supportbundle"
	"antrea.io/antrea/pkg/version"
)

// antctl supportbundle: one tar.gz per component (pkg/supportbundle) and a
// summary in one directory. Each agent's bundle is made on its node: by the
// agent API's /supportbundle when the agent serves it, else by running
// `antctl supportbundle --local` in the antrea-agent container through
// pods/exec with the tarball streamed on stdout. antctl adds what the
// Kubernetes API holds (the containers' logs, the pod) and, for a bundle
// made by exec, the agent's goroutine and heap profiles from its API. The
// controller's image has no shell, so its bundle is made from the API:
// its logs, pod, the antrea-config ConfigMap (redacted), the computed
// controlplane objects and its profiles from its API server. A component
// that cannot be reached is reported and the others are still collected.

const (
	agentLogDir          = "/var/log/antrea"
	bundleParallel       = 4
	bundleNodeTimeout    = 3 * time.Minute
	agentContainer       = "antrea-agent"
	ovsContainer         = "antrea-ovs"
	controllerContainer  = "antrea-controller"
	supportBundlePath    = "/supportbundle"
	pprofGoroutinePath   = "/debug/pprof/goroutine?debug=2"
	pprofHeapPath        = "/debug/pprof/heap"
	bundleProfileTimeout = 30 * time.Second
)

type supportBundleOptions struct {
	*options
	// nodes: names or shell patterns ('*worker*'), from --nodes and the
	// arguments.
	nodes          []string
	labelSelector  string
	nodeListFile   string
	controllerOnly bool
	insecure       bool
	dir            string
	local          bool
	tailBytes      int64
	// since leaves out older logs (0: all).
	since time.Duration
}

func newSupportBundleCommand(o *options) *cobra.Command {
	s := &supportBundleOptions{options: o}
	cmd := &cobra.Command{
		Use:   "supportbundle [NODE...] [-d DIR] [-l SELECTOR] [-f FILE] [--controller-only] [--local]",
		Short: "Collect logs, config, flows, OVSDB, network state and profiles of the controller and agents into tarballs",
		Long: `Collect what a bug report needs, one tar.gz per component and a summary, into one directory:
for each agent its version, conf (secrets, tokens, keys and kubeconfig credentials
redacted), log files (their last --tail-bytes), the bridge's flows and groups, an OVSDB
dump, ip addr/route/rule/link, iptables and nft rules, conntrack counts, the agent and OVS
containers' logs and the agent's goroutine and heap profiles; for the controller its
logs, pod, config, computed policies and groups and profiles. Every tarball ends with
summary.json saying what each entry holds and what could not be collected. An agent that
cannot be reached is named and the others are still collected.

Without a node filter: the controller and every agent. With one (NODE names or shell
patterns such as '*worker*', -l, -f or --nodes): only those Nodes' agents, as upstream
antctl. --controller-only: only the controller.

--local makes the bundle of this node in the antrea-agent container, written to stdout
(or --dir).`,
		Example: `  antctl supportbundle
  antctl supportbundle -d /tmp/bundle
  antctl supportbundle node-1 node-2
  antctl supportbundle '*worker*' -l kubernetes.io/os=linux
  antctl supportbundle -f nodes.txt
  antctl supportbundle --controller-only
  ` + localModeHowTo + ` supportbundle --local > node.tar.gz`,
		Args: cobra.ArbitraryArgs,
		RunE: s.run,
	}
	// Upstream antctl's flags (pkg/antctl/raw/supportbundle/command.go)
	// with their short forms, then ours.
	f := cmd.Flags()
	f.StringVarP(&s.dir, "dir", "d", "", "Where to write the tarballs, created if missing (default: ./antrea-support-bundle-<time>)")
	f.StringVarP(&s.labelSelector, "label-selector", "l", "", "Only the agents of the Nodes this label selector selects (e.g. -l kubernetes.io/os=linux)")
	f.BoolVar(&s.controllerOnly, "controller-only", false, "Only the controller's bundle")
	f.StringVarP(&s.nodeListFile, "node-list-file", "f", "", "Only the agents of the Nodes named in this file, one a line")
	f.DurationVar(&s.since, "since", 0, "Only the logs newer than this (5s, 2m, 3h): the containers' logs from then on, and the log files written since")
	f.BoolVar(&s.insecure, "insecure", false, "Do not verify the agents' serving certificates (antctl never does: they are self-signed)")
	f.StringSliceVar(&s.nodes, "nodes", nil, "Only these nodes' agents (comma-separated names or patterns; the same as arguments)")
	f.BoolVar(&s.local, "local", false, "Make this node's bundle (in the antrea-agent container), to stdout unless --dir")
	f.Int64Var(&s.tailBytes, "tail-bytes", supportbundle.DefaultTailBytes, "How much of the end of each log to keep")
	_ = cmd.RegisterFlagCompletionFunc("nodes", o.completeNodes)
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

func (s *supportBundleOptions) run(cmd *cobra.Command, args []string) error {
	s.nodes = append(s.nodes, args...)
	if s.local && (len(s.nodes) > 0 || s.labelSelector != "" || s.nodeListFile != "" || s.controllerOnly) {
		return errors.New("--local makes this node's bundle: it takes no node filter and no --controller-only")
	}
	if s.local {
		return s.runLocal(cmd.Context())
	}
	return s.runRemote(cmd.Context())
}

// localCollector is this node's collector in the agent container.
func (s *supportBundleOptions) localCollector() (*supportbundle.Collector, error) {
	conf, err := s.agentConfig()
	if errors.Is(err, errNotLocal) {
		return nil, fmt.Errorf("--local makes the bundle of the node it runs on and needs the agent's conf (%s): run it in the antrea-agent container: %s supportbundle --local",
			filepath.Join(s.configDir, agentconfig.FileName), localModeHowTo)
	}
	if err != nil {
		return nil, err
	}
	node := s.env.NodeName
	if node == "" {
		node, _ = os.Hostname()
	}
	c := supportbundle.AgentCollector(supportbundle.AgentOptions{Node: node, Version: version.String("antrea-agent"),
		ConfigDir: s.configDir, Conf: conf, LogDir: agentLogDir, TailBytes: s.tailBytes})
	if s.since > 0 {
		c.LogsSince = time.Now().Add(-s.since)
	}
	return c, nil
}

func (s *supportBundleOptions) runLocal(ctx context.Context) error {
	c, err := s.localCollector()
	if err != nil {
		return err
	}
	if s.dir == "" {
		_, err := c.Collect(ctx, s.env.Out)
		return err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(s.dir, "agent-"+c.Node+".tar.gz")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	sum, err := c.Collect(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(s.env.Out, "Wrote %s (%d entries, %d not collected)\n", path, len(sum.Items), len(sum.Failed()))
	return nil
}

// bundleResult is one component's outcome.
type bundleResult struct {
	Component string  `json:"component"`
	Node      string  `json:"node,omitempty"`
	File      string  `json:"file,omitempty"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Entries   int     `json:"entries"`
	// Missing names the entries that could not be collected.
	Missing []string `json:"missing,omitempty"`
	// Error: the component could not be collected at all.
	Error string `json:"error,omitempty"`
	// Via says how the bundle was made.
	Via string `json:"via,omitempty"`
}

func (s *supportBundleOptions) runRemote(ctx context.Context) error {
	start := time.Now()
	c, err := s.getClients()
	if err != nil {
		return err
	}
	nodes, withController, err := s.selectNodes(ctx, c)
	if err != nil {
		return err
	}
	dir := s.dir
	if dir == "" {
		dir = "antrea-support-bundle-" + start.UTC().Format("20060102-150405")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	what := fmt.Sprintf("%d agent(s)", len(nodes))
	if withController {
		what = "the controller and " + what
	}
	fmt.Fprintf(s.env.Err, "Collecting %s into %s...\n", what, dir)
	results := make([]bundleResult, len(nodes)+1)
	var wg sync.WaitGroup
	if withController {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[0] = s.collectController(ctx, c, dir)
		}()
	}
	sem := make(chan struct{}, bundleParallel)
	for i, n := range nodes {
		wg.Add(1)
		go func(i int, n string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i+1] = s.collectAgent(ctx, c, dir, n)
		}(i, n)
	}
	wg.Wait()
	t := &table{header: []string{"COMPONENT", "NODE", "FILE", "SIZE", "SECONDS", "VIA", "RESULT"}}
	var failed []string
	for _, r := range results {
		if r.Component == "" {
			continue // the controller, not asked for
		}
		res := "ok"
		switch {
		case r.Error != "":
			res = "FAILED: " + r.Error
			what := r.Component
			if r.Node != "" {
				what += " on " + r.Node
			}
			failed = append(failed, what)
		case len(r.Missing) > 0:
			res = fmt.Sprintf("ok, %d of %d entries not collected: %s", len(r.Missing), r.Entries, joinFew(r.Missing, 4))
		}
		size := ""
		if r.File != "" {
			size = humanBytes(r.Bytes)
		}
		t.add(r.Component, r.Node, r.File, size, fmt.Sprintf("%.1f", r.Seconds), r.Via, res)
	}
	var buf bytes.Buffer
	_ = t.write(&buf)
	fmt.Fprintf(&buf, "total: %s in %.1fs\n", humanBytes(totalBytes(results)), time.Since(start).Seconds())
	_ = os.WriteFile(filepath.Join(dir, "summary.txt"), buf.Bytes(), 0o644)
	if js, err := jsonIndent(results); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "summary.json"), js, 0o644)
	}
	if _, err := s.env.Out.Write(buf.Bytes()); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("supportbundle: could not collect from %s (the others are in %s)", strings.Join(failed, ", "), dir)
	}
	return nil
}

// selectNodes returns the nodes whose agents to collect, and whether to
// collect the controller: upstream antctl's rule, the controller when no
// node filter is given or with --controller-only.
func (s *supportBundleOptions) selectNodes(ctx context.Context, c *Clients) (nodes []string, withController bool, err error) {
	if s.controllerOnly {
		return nil, true, nil
	}
	list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: s.labelSelector})
	if err != nil {
		return nil, false, fmt.Errorf("listing nodes: %w", err)
	}
	var all []string
	for _, n := range list.Items {
		all = append(all, n.Name)
	}
	sort.Strings(all)
	patterns := s.nodes
	if s.nodeListFile != "" {
		b, err := os.ReadFile(s.nodeListFile)
		if err != nil {
			return nil, false, fmt.Errorf("--node-list-file: %w", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				patterns = append(patterns, l)
			}
		}
	}
	if len(patterns) == 0 {
		if s.labelSelector != "" && len(all) == 0 {
			return nil, false, fmt.Errorf("no Node matches -l %s", s.labelSelector)
		}
		return all, s.labelSelector == "", nil
	}
	picked := map[string]bool{}
	for _, p := range patterns {
		matched := false
		for _, n := range all {
			if ok, err := filepath.Match(p, n); err != nil {
				return nil, false, fmt.Errorf("node pattern %q: %w", p, err)
			} else if ok {
				picked[n], matched = true, true
			}
		}
		if !matched {
			where := ""
			if s.labelSelector != "" {
				where = " among the Nodes of -l " + s.labelSelector
			}
			return nil, false, fmt.Errorf("node %q not found%s%s", p, where, didYouMean(p, all))
		}
	}
	for _, n := range all {
		if picked[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes, false, nil
}

func totalBytes(rs []bundleResult) int64 {
	var n int64
	for _, r := range rs {
		n += r.Bytes
	}
	return n
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func jsonIndent(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeObject(&b, outputJSON, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeBundle writes a bundle made by make into dir/name, and fills r.
func writeBundle(dir, name string, r *bundleResult, make func(w io.Writer) (*supportbundle.Summary, error)) {
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		r.Error = err.Error()
		return
	}
	sum, err := make(f)
	cerr := f.Close()
	if err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		r.Error = err.Error()
		return
	}
	r.File = name
	if st, err := os.Stat(path); err == nil {
		r.Bytes = st.Size()
	}
	r.Entries = len(sum.Items)
	for _, it := range sum.Failed() {
		r.Missing = append(r.Missing, it.Name)
	}
}

// collectAgent makes node's bundle: the agent API's /supportbundle, else
// antctl supportbundle --local by exec; then the containers' logs, the pod
// and (for exec) the agent's profiles are added.
func (s *supportBundleOptions) collectAgent(ctx context.Context, c *Clients, dir, node string) (r bundleResult) {
	start := time.Now()
	r = bundleResult{Component: "antrea-agent", Node: node}
	defer func() { r.Seconds = time.Since(start).Seconds() }()
	ctx, cancel := context.WithTimeout(ctx, bundleNodeTimeout)
	defer cancel()
	pod, err := s.agentPod(ctx, c, node)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	var raw bytes.Buffer
	var api *http.Client
	var apiBase string
	if ac, err := s.agentClientFor(ctx, node); err == nil {
		api, apiBase = ac.http, ac.base
	}
	viaAPI := false
	if api != nil {
		q := url.Values{"tailBytes": {strconv.FormatInt(s.tailBytes, 10)}}
		if s.since > 0 {
			q.Set("since", s.since.String())
		}
		status, err := httpGet(ctx, api, apiBase+supportBundlePath+"?"+q.Encode(), &raw)
		viaAPI = err == nil && status == http.StatusOK
		if !viaAPI {
			raw.Reset()
		}
	}
	if viaAPI {
		r.Via = "agent API"
	} else {
		r.Via = "exec"
		var errb bytes.Buffer
		argv := []string{"antctl", "supportbundle", "--local", "--tail-bytes", strconv.FormatInt(s.tailBytes, 10)}
		if s.since > 0 {
			argv = append(argv, "--since", s.since.String())
		}
		if err := execInPod(s.options)(ctx, antreaNamespace, pod.Name, agentContainer, argv, &raw, &errb); err != nil {
			if msg := lastLine(errb.String()); msg != "" {
				err = fmt.Errorf("%w: %s", err, msg)
			}
			r.Error = fmt.Sprintf("agent pod %s: %v", pod.Name, err)
			return r
		}
	}
	writeBundle(dir, "agent-"+node+".tar.gz", &r, func(w io.Writer) (*supportbundle.Summary, error) {
		return supportbundle.Extend(&raw, w, func(b *supportbundle.Bundle) error {
			if err := s.addPodEntries(ctx, c, b, pod, []string{agentContainer, ovsContainer}); err != nil {
				return err
			}
			if viaAPI {
				return nil // the agent's own profiles are in it
			}
			return addProfiles(ctx, b, api, apiBase, "agent API of node "+node)
		}, nil)
	})
	return r
}

func (s *supportBundleOptions) agentPod(ctx context.Context, c *Clients, node string) (*corev1.Pod, error) {
	list, err := c.Kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{componentLabel: agentDaemonSet}.String(), FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("listing the agent pods: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == node {
			p := &list.Items[i]
			if p.Status.Phase != corev1.PodRunning {
				return nil, fmt.Errorf("agent pod %s is %s", p.Name, p.Status.Phase)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("no antrea-agent pod on node %s", node)
}

// addPodEntries adds the pod object and the tail of its containers' logs.
func (s *supportBundleOptions) addPodEntries(ctx context.Context, c *Clients, b *supportbundle.Bundle, pod *corev1.Pod, containers []string) error {
	if y, err := yaml.Marshal(pod); err == nil {
		if err := b.Add("kubernetes/pod.yaml", y, false); err != nil {
			return err
		}
	}
	for _, ct := range containers {
		name := "pod-logs/" + ct + ".log"
		limit := s.tailBytes
		opts := &corev1.PodLogOptions{Container: ct, LimitBytes: &limit, TailLines: ptrInt64(100000)}
		if s.since > 0 {
			opts.SinceSeconds = ptrInt64(int64(s.since.Seconds()))
		}
		data, err := c.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Do(ctx).Raw()
		if err != nil {
			if werr := b.Fail(name, nil, err); werr != nil {
				return werr
			}
			continue
		}
		if err := b.Add(name, data, int64(len(data)) >= limit); err != nil {
			return err
		}
	}
	return nil
}

func ptrInt64(v int64) *int64 { return &v }

// addProfiles adds the goroutine and heap profiles a component's API
// serves (/debug/pprof, authorized by the antctl ClusterRole).
func addProfiles(ctx context.Context, b *supportbundle.Bundle, api *http.Client, base, what string) error {
	for _, p := range []struct{ name, path string }{{"profiles/goroutine.txt", pprofGoroutinePath}, {"profiles/heap.pb.gz", pprofHeapPath}} {
		if api == nil {
			if err := b.Fail(p.name, nil, fmt.Errorf("%s cannot be reached", what)); err != nil {
				return err
			}
			continue
		}
		var buf bytes.Buffer
		pctx, cancel := context.WithTimeout(ctx, bundleProfileTimeout)
		status, err := httpGet(pctx, api, base+p.path, &buf)
		cancel()
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%s: GET %s: HTTP %d: %s", what, p.path, status, lastLine(buf.String()))
		}
		if err != nil {
			if werr := b.Fail(p.name, nil, err); werr != nil {
				return werr
			}
			continue
		}
		if err := b.Add(p.name, buf.Bytes(), false); err != nil {
			return err
		}
	}
	return nil
}

func httpGet(ctx context.Context, c *http.Client, url string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

// collectController makes the controller's bundle from the API.
func (s *supportBundleOptions) collectController(ctx context.Context, c *Clients, dir string) (r bundleResult) {
	start := time.Now()
	r = bundleResult{Component: controllerName, Via: "Kubernetes API"}
	defer func() { r.Seconds = time.Since(start).Seconds() }()
	list, err := c.Kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{componentLabel: controllerName}.String()})
	if err != nil {
		r.Error = fmt.Sprintf("listing the controller pods: %v", err)
		return r
	}
	if len(list.Items) == 0 {
		r.Error = "no antrea-controller pod"
		return r
	}
	pod := &list.Items[0]
	r.Node = pod.Spec.NodeName
	image := ""
	for _, ct := range pod.Spec.Containers {
		if ct.Name == controllerContainer {
			image = ct.Image
		}
	}
	col := &supportbundle.Collector{Component: controllerName, Node: pod.Spec.NodeName, Version: image,
		Funcs: []supportbundle.Func{
			{Name: "config/antrea-config.yaml", Write: func(ctx context.Context, w io.Writer) error {
				cm, err := c.Kube.CoreV1().ConfigMaps(antreaNamespace).Get(ctx, antreaConfigMap, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, k := range []string{controllerconfig.FileName, agentconfig.FileName} {
					fmt.Fprintf(w, "# %s\n%s\n", k, cm.Data[k])
				}
				return nil
			}},
			{Name: "controlplane/networkpolicies.yaml", Write: func(ctx context.Context, w io.Writer) error {
				l, err := c.Antrea.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{})
				return writeYAML(w, l, err)
			}},
			{Name: "controlplane/appliedtogroups.yaml", Write: func(ctx context.Context, w io.Writer) error {
				l, err := c.Antrea.ControlplaneV1beta2().AppliedToGroups().List(ctx, metav1.ListOptions{})
				return writeYAML(w, l, err)
			}},
			{Name: "controlplane/addressgroups.yaml", Write: func(ctx context.Context, w io.Writer) error {
				l, err := c.Antrea.ControlplaneV1beta2().AddressGroups().List(ctx, metav1.ListOptions{})
				return writeYAML(w, l, err)
			}},
		}}
	api, base := s.controllerAPI(ctx, c, pod)
	writeBundle(dir, "controller.tar.gz", &r, func(w io.Writer) (*supportbundle.Summary, error) {
		var raw bytes.Buffer
		if _, err := col.Collect(ctx, &raw); err != nil {
			return nil, err
		}
		return supportbundle.Extend(&raw, w, func(b *supportbundle.Bundle) error {
			if err := s.addPodEntries(ctx, c, b, pod, []string{controllerContainer}); err != nil {
				return err
			}
			return addProfiles(ctx, b, api, base, "the controller's API server")
		}, nil)
	})
	return r
}

// controllerAPI is a client of the controller's own API server (its pod IP,
// apiPort), as for the agent API: the kubeconfig's credentials, the
// self-signed certificate not verified.
func (s *supportBundleOptions) controllerAPI(ctx context.Context, c *Clients, pod *corev1.Pod) (*http.Client, string) {
	if pod.Status.PodIP == "" {
		return nil, ""
	}
	port := controllerconfig.Defaults().APIPort
	if cm, err := c.Kube.CoreV1().ConfigMaps(antreaNamespace).Get(ctx, antreaConfigMap, metav1.GetOptions{}); err == nil {
		if conf, err := controllerconfig.Parse(controllerconfig.FileName, []byte(cm.Data[controllerconfig.FileName])); err == nil && conf.APIPort != 0 {
			port = conf.APIPort
		}
	}
	cfg, err := s.restConfig()
	if err != nil {
		return nil, ""
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port))
	cfg.TLSClientConfig.Insecure = true
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.ServerName = "", nil, ""
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, ""
	}
	return &http.Client{Transport: rt, Timeout: bundleProfileTimeout}, cfg.Host
}

func writeYAML(w io.Writer, v any, err error) error {
	if err != nil {
		return err
	}
	y, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}
