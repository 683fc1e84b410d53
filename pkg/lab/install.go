package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"sigs.k8s.io/yaml"
)

// On real nodes the lab installs Antrea as a user does: `kubectl apply -f`
// of build/yamls/antrea.yml (generated from the Helm chart by `make
// manifests`). The agent DaemonSet (install-cni, antrea-agent, antrea-ovs) and
// the controller Deployment run as pods from the images the lab builds. What
// the lab changes in the manifest is the overlay below, the kind of edit a
// user makes with kustomize or Helm values for a cluster like this one; the
// result is written to _output/lab/antrea.yml for anyone to read.

const (
	// ManifestName is the manifest the lab applies, in build/yamls.
	ManifestName = "antrea.yml"
	// AntreaNamespace is where the manifest puts Antrea.
	AntreaNamespace = "kube-system"
	// antreaConfigMap holds antrea-agent.conf and antrea-controller.conf.
	antreaConfigMap = "antrea-config"
	// AgentDaemonSet and ControllerDeployment are the manifest's workloads.
	AgentDaemonSet       = "antrea-agent"
	ControllerDeployment = "antrea-controller"
	// controlplaneAPIService is the APIService the controller serves.
	controlplaneAPIService = "v1beta2.controlplane.antrea.io"
)

// SourceManifest is the manifest in the repository, build/yamls/antrea.yml.
func (o Options) SourceManifest() string { return filepath.Join(o.manifestDir(), ManifestName) }

// AppliedManifest is the manifest the lab applied: the source with the
// lab's overlay.
func (o Options) AppliedManifest() string { return filepath.Join(o.Dir, ManifestName) }

// DefaultLBPool is the ExternalIPPool the lab's antrea-controller gives
// LoadBalancer Services without the service.antrea.io/external-ip-pool
// annotation (serviceExternalIP.defaultExternalIPPool). The lab does not
// create it: create it (a range of 172.30.0.200-249) to have every
// LoadBalancer Service served, as make conformance-lb does.
const DefaultLBPool = "lab-lb"

// labConfOverlay returns the keys the lab sets in each conf file of the
// antrea-config ConfigMap:
//   - the userspace datapath: this kernel has no openvswitch module;
//   - the API server's address: pods reach kube-apiserver through the
//     `kubernetes` Service, but nothing realizes ClusterIPs for the nodes' own
//     network namespace (kube-proxy's job; AntreaProxy does it for pods), so
//     agent and controller, both hostNetwork, are told where it is, as
//     upstream's docs advise for clusters without kube-proxy;
//   - the encapsulation chosen with `antrea-lab up --encap` and the
//     traffic mode chosen with `--traffic-mode`, the encryption with
//     `--encryption` (none or wireguard);
//   - with `--proxy kube-proxy`, AntreaProxy off (antreaProxy.enable).
//   - the NetworkPolicy stats reported every 5 s instead of 60 s
//     (statsCollectionInterval), so that tests see them soon;
//   - the controller's ServiceExternalIP gate on (LoadBalancer IPs), with
//     DefaultLBPool as the pool of LoadBalancer Services without the
//     annotation (the pool itself is not created);
//   - the agents' PacketCapture, NodeLatencyMonitor, NodeNetworkPolicy,
//     EgressTrafficShaping, BGPPolicy, TrafficControl gates on, and SupportBundleCollection and L7NetworkPolicy in both (upstream: alpha,
//     off by default), so that they can be tried (BGPPolicy with the lab's
//     router, router.go).
//   - multicast on (multicast.enable; upstream's default is off), with
//     IGMPv3 queries only, so that the Pods send leaves (docs/multicast.md);
//   - NodePortLocal on (nodePortLocal.enable; upstream's default is off),
//     so that the outside host reaches annotated Services' Pods.
//   - with `--flow-visibility`, the FlowExporter on (flowExporterOverlay).
func (o Options) labConfOverlay() map[string]map[string]string {
	apiServer := o.apiServerURL()
	overlay := map[string]map[string]string{
		"antrea-agent.conf": {
			"ovsDatapathType":                      "netdev",
			"tunnelType":                           o.Encap,
			"trafficEncapMode":                     o.trafficMode(),
			"trafficEncryptionMode":                o.encryptionMode(),
			"kubeAPIServerOverride":                apiServer,
			"statsCollectionInterval":              "5s",
			"featureGates.PacketCapture":           "true",
			"featureGates.NodeLatencyMonitor":      "true",
			"featureGates.NodeNetworkPolicy":       "true",
			"featureGates.EgressTrafficShaping":    "true",
			"nodePortLocal.enable":                 "true",
			"featureGates.SupportBundleCollection": "true",
			"featureGates.BGPPolicy":               "true",
			"featureGates.TrafficControl":          "true",
			"multicast.enable":                     "true",
			"multicast.igmpQueryVersions":          "[3]",
			"featureGates.L7NetworkPolicy":         "true",
		},
		"antrea-controller.conf": {
			"kubeAPIServerOverride": apiServer,
			// LoadBalancer IPs from ExternalIPPools (upstream: alpha,
			// off by default): the lab's outside host reaches them.
			"featureGates.ServiceExternalIP": "true",
			// L7NetworkPolicy (upstream: alpha, off by default), on
			// with the agents' gate: admission accepts l7Protocols.
			"featureGates.L7NetworkPolicy": "true",
			// SupportBundleCollection (upstream: alpha, off by
			// default): the lab's outside host runs an SFTP server.
			"featureGates.SupportBundleCollection": "true",
			// LoadBalancer Services without the pool annotation take
			// their IP from DefaultLBPool once someone creates it
			// (make conformance-lb does).
			"serviceExternalIP.defaultExternalIPPool": DefaultLBPool,
		},
	}
	if o.Proxy == ProxyKube {
		overlay["antrea-agent.conf"]["antreaProxy.enable"] = "false"
	}
	if o.ipv6Only() {
		// Multicast is IPv4 (IGMP) only, here as upstream.
		overlay["antrea-agent.conf"]["multicast.enable"] = "false"
	}
	if o.FlowVisibility {
		for k, v := range flowExporterOverlay {
			overlay["antrea-agent.conf"][k] = v
		}
	}
	return overlay
}

// flowExporterOverlay turns the agents' FlowExporter on, sending over gRPC to
// the Service of build/yamls/flow-aggregator.yml, with short timeouts so
// that a connection shows in the aggregator seconds after it moved: polled
// every second, a record every 2 s while it moves, 5 s after it stops.
var flowExporterOverlay = map[string]string{
	"featureGates.FlowExporter":            "true",
	"flowExporter.enable":                  "true",
	"flowExporter.flowCollectorAddr":       "flow-aggregator/flow-aggregator:14739:grpc",
	"flowExporter.flowPollInterval":        "1s",
	"flowExporter.activeFlowExportTimeout": "2s",
	"flowExporter.idleFlowExportTimeout":   "5s",
}

// RenderManifest returns the manifest src with the lab's overlay applied to
// the antrea-config ConfigMap; every other object is left as it is. Each
// overlay key replaces the key's line in the conf file (set or commented
// out), or is appended, so the file keeps its comments.
func (o Options) RenderManifest(src []byte) ([]byte, error) {
	docs, err := splitYAML(src)
	if err != nil {
		return nil, err
	}
	found := false
	var out bytes.Buffer
	for _, doc := range docs {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if meta.Kind == "ConfigMap" && meta.Metadata.Name == antreaConfigMap {
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
				return nil, fmt.Errorf("manifest: ConfigMap %s: %w", antreaConfigMap, err)
			}
			for file, keys := range o.labConfOverlay() {
				conf, ok := cm.Data[file]
				if !ok {
					return nil, fmt.Errorf("manifest: ConfigMap %s has no %s", antreaConfigMap, file)
				}
				for k, v := range keys {
					if conf, err = setConfKey(conf, k, v); err != nil {
						return nil, fmt.Errorf("manifest: ConfigMap %s, %s: %w", antreaConfigMap, file, err)
					}
				}
				cm.Data[file] = conf
			}
			if doc, err = yaml.Marshal(&cm); err != nil {
				return nil, err
			}
			found = true
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimRight(doc, "\n"))
		out.WriteString("\n")
	}
	if !found {
		return nil, fmt.Errorf("manifest has no ConfigMap %s", antreaConfigMap)
	}
	return out.Bytes(), nil
}

// splitYAML returns the non-empty documents of a multi-document YAML file.
func splitYAML(src []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufioReader(src))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// setConfKey sets the top-level key of a YAML conf file to value: the first
// line that sets it, or else the first commented-out `#key:` line, becomes
// `key: "value"`; without either the line is appended. A key
// "section.key" sets the line of key in the section's block instead; it
// must be there. Values "true" and "false" are written as YAML booleans,
// values in brackets ("[3]") as YAML flow sequences.
func setConfKey(conf, key, value string) (string, error) {
	quoted := fmt.Sprintf("%q", value)
	if value == "true" || value == "false" || (strings.HasPrefix(value, "[") && strings.HasSuffix(value, "]")) {
		quoted = value
	}
	if section, sub, ok := strings.Cut(key, "."); ok {
		start := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(section) + `:.*$`).FindStringIndex(conf)
		if start == nil {
			return "", fmt.Errorf("no %s section for %s", section, key)
		}
		block := conf[start[1]:]
		if end := regexp.MustCompile(`(?m)^[A-Za-z]`).FindStringIndex(block); end != nil {
			block = block[:end[0]]
		}
		loc := regexp.MustCompile(`(?m)^(\s+)` + regexp.QuoteMeta(sub) + `:.*$`).FindStringSubmatchIndex(block)
		if loc == nil {
			return "", fmt.Errorf("no %s line in its %s section", sub, section)
		}
		indent := block[loc[2]:loc[3]]
		at := start[1]
		return conf[:at+loc[0]] + indent + sub + ": " + quoted + conf[at+loc[1]:], nil
	}
	line := fmt.Sprintf("%s: %s", key, quoted)
	set := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:.*$`)
	if loc := set.FindStringIndex(conf); loc != nil {
		return conf[:loc[0]] + line + conf[loc[1]:], nil
	}
	commented := regexp.MustCompile(`(?m)^#\s*` + regexp.QuoteMeta(key) + `:.*$`)
	if loc := commented.FindStringIndex(conf); loc != nil {
		return conf[:loc[0]] + line + conf[loc[1]:], nil
	}
	if conf != "" && !strings.HasSuffix(conf, "\n") {
		conf += "\n"
	}
	return conf + line + "\n", nil
}

// installAntrea applies the lab's rendering of build/yamls/antrea.yml with
// kubectl and waits until the agent runs on every node, the controller is
// available and kube-apiserver reaches the controlplane API.
func (s *supervisor) installAntrea(ctx context.Context, nodes int) error {
	src, err := os.ReadFile(s.opts.SourceManifest())
	if err != nil {
		return fmt.Errorf("read the Antrea manifest (make manifests): %w", err)
	}
	rendered, err := s.opts.RenderManifest(src)
	if err != nil {
		return fmt.Errorf("%s: %w", s.opts.SourceManifest(), err)
	}
	if err := os.WriteFile(s.opts.AppliedManifest(), rendered, 0o644); err != nil {
		return err
	}
	applied := time.Now()
	if out, err := s.opts.kubectl(ctx, "apply", "-f", s.opts.AppliedManifest()); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w\n%s", s.opts.AppliedManifest(), err, out)
	}
	_ = s.store.update(func(st *State) { st.Antrea.AppliedAt = applied })
	s.logf("applied %s (from %s); waiting for antrea-agent on %d nodes and antrea-controller", s.opts.AppliedManifest(), s.opts.SourceManifest(), nodes)
	agg, err := aggregatorclient.NewForConfig(s.restConfig(s.creds))
	if err != nil {
		return err
	}
	var last string
	for {
		msg, agentsReady, controllerReady := s.antreaReadiness(ctx, agg, nodes)
		now := time.Now()
		_ = s.store.update(func(st *State) {
			if agentsReady && st.Antrea.AgentsReadyAt.IsZero() {
				st.Antrea.AgentsReadyAt = now
			}
			if controllerReady && st.Antrea.ControllerReadyAt.IsZero() {
				st.Antrea.ControllerReadyAt = now
			}
		})
		if agentsReady && controllerReady {
			s.logf("Antrea ready %.1fs after kubectl apply (agents %.1fs, controller and its APIService %.1fs)",
				now.Sub(applied).Seconds(), s.store.snapshot().Antrea.AgentsReadyAt.Sub(applied).Seconds(),
				s.store.snapshot().Antrea.ControllerReadyAt.Sub(applied).Seconds())
			return nil
		}
		if msg != last {
			klog.InfoS("Waiting for Antrea", "status", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Antrea installed from %s (%s): %w; see `kubectl -n %s get pods` and `kubectl -n %s describe pods`",
				s.opts.AppliedManifest(), last, ctx.Err(), AntreaNamespace, AntreaNamespace)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// antreaReadiness says how far the installation is.
func (s *supervisor) antreaReadiness(ctx context.Context, agg aggregatorclient.Interface, nodes int) (msg string, agents, controller bool) {
	var parts []string
	ds, err := s.client.AppsV1().DaemonSets(AntreaNamespace).Get(ctx, AgentDaemonSet, metav1.GetOptions{})
	if err == nil {
		st := ds.Status
		agents = st.ObservedGeneration >= ds.Generation && int(st.DesiredNumberScheduled) == nodes &&
			int(st.NumberReady) == nodes && int(st.UpdatedNumberScheduled) == nodes
		parts = append(parts, fmt.Sprintf("agents ready %d/%d", st.NumberReady, nodes))
	} else {
		parts = append(parts, "agent DaemonSet: "+err.Error())
	}
	dep, err := s.client.AppsV1().Deployments(AntreaNamespace).Get(ctx, ControllerDeployment, metav1.GetOptions{})
	depReady := false
	if err == nil {
		depReady = dep.Status.ObservedGeneration >= dep.Generation && dep.Status.ReadyReplicas >= 1 &&
			dep.Status.UpdatedReplicas == dep.Status.Replicas
		parts = append(parts, fmt.Sprintf("controller ready %d/%d", dep.Status.ReadyReplicas, dep.Status.Replicas))
	} else {
		parts = append(parts, "controller Deployment: "+err.Error())
	}
	apiAvailable := false
	as, err := agg.ApiregistrationV1().APIServices().Get(ctx, controlplaneAPIService, metav1.GetOptions{})
	switch {
	case err == nil:
		for _, c := range as.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				apiAvailable = c.Status == apiregistrationv1.ConditionTrue
				if !apiAvailable {
					parts = append(parts, "APIService: "+c.Message)
				}
			}
		}
	case apierrors.IsNotFound(err):
		parts = append(parts, "APIService not found")
	default:
		parts = append(parts, "APIService: "+err.Error())
	}
	return strings.Join(parts, ", "), agents, depReady && apiAvailable
}

// kubectl runs the lab's kubectl with the host kubeconfig.
func (o Options) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(o.KubeBinDir, "kubectl"), append([]string{"--kubeconfig", o.KubeconfigPath()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
