package antctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// From a laptop, the commands that read a node's OVS ask that node's agent
// API (pkg/agent/apiserver) instead, as upstream's antctl does: antctl dials
// the Node's InternalIP on the agent's apiPort (antrea-config's
// antrea-agent.conf, default 10350) with the kubeconfig's own credentials
// (bearer token, client certificate or exec plugin), which the agent has
// kube-apiserver review; the user needs the antctl ClusterRole. The agent's
// certificate is self-signed (generated at its start), so antctl does not
// verify it, as upstream's antctl does not.

const (
	nodeFlag          = "node"
	agentAPITimeout   = 30 * time.Second
	agentAPIHowToText = `
From a laptop (kubeconfig), --node NODE (or -p POD, whose node antctl looks
up) reads that node through its agent API (HTTPS to the Node's InternalIP,
port apiPort, 10350), authorized by kube-apiserver: the user needs the
antctl ClusterRole (docs/antctl.md).`
)

// addNodeFlag gives a command that reads a node's OVS the --node flag of
// the agent API path.
func addNodeFlag(cmd *cobra.Command) {
	cmd.Flags().String(nodeFlag, "", "From a laptop: the node whose agent API to ask (default: the node of -p POD)")
	cmd.Long += "\n" + agentAPIHowToText
}

// agentClient reads one node's agent API.
type agentClient struct {
	node string
	// how says how to run the command in the agent container instead.
	how  string
	base string
	http *http.Client
}

// requireNode is requireLocal for the commands the agent API serves: local
// mode reads this node's OVS, unless --node names another node; from a
// laptop the node of --node, or of -p POD, is asked through its agent API.
func (o *options) requireNode(cmd *cobra.Command, podNS, pod string) (*localNode, error) {
	node, _ := cmd.Flags().GetString(nodeFlag)
	if o.local() && (node == "" || node == o.env.NodeName) {
		return o.requireLocal(cmd, podNS, pod)
	}
	ctx := cmd.Context()
	if node == "" && pod != "" {
		c, err := o.getClients()
		if err != nil {
			return nil, err
		}
		p, err := c.Kube.CoreV1().Pods(podNS).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", podNS, pod, err)
		}
		if p.Spec.NodeName == "" {
			return nil, fmt.Errorf("pod %s/%s is not scheduled to a node yet", podNS, pod)
		}
		node = p.Spec.NodeName
	}
	if node == "" {
		return nil, fmt.Errorf("%s reads a node's OVS: give --node NODE (or -p POD) to ask that node's agent API, or run it in the antrea-agent container: %s",
			strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), localModeHowTo+" "+replayArgs(cmd))
	}
	// Should the agent API be out of reach: what to run instead.
	how := localModeHowTo + " " + replayArgs(cmd)
	if target := o.agentPodOn(ctx, node); target != "" {
		how = strings.Replace(how, "ds/"+agentDaemonSet, target, 1)
	}
	ac, err := o.agentClientFor(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("%w; or run it in the antrea-agent container: %s", err, how)
	}
	ac.how = how
	return &localNode{remote: ac}, nil
}

// agentClientFor builds the client of node's agent API from the kubeconfig.
func (o *options) agentClientFor(ctx context.Context, node string) (*agentClient, error) {
	c, err := o.getClients()
	if err != nil {
		return nil, err
	}
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		if names := o.nodeNames(ctx); len(names) > 0 {
			return nil, fmt.Errorf("node %q: %w%s", node, err, didYouMean(node, names))
		}
		return nil, fmt.Errorf("node %q: %w", node, err)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
			break
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("node %s has no InternalIP to reach its agent API at", node)
	}
	port := o.agentAPIPort(ctx)
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + net.JoinHostPort(ip, strconv.Itoa(port))
	cfg.APIPath = ""
	// The agent's certificate is self-signed: not verified (see above).
	cfg.TLSClientConfig.Insecure = true
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.ServerName = "", nil, ""
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent API of node %s: %w", node, err)
	}
	return &agentClient{node: node, base: cfg.Host, http: &http.Client{Transport: rt, Timeout: agentAPITimeout}}, nil
}

// agentPodOn names the antrea-agent pod on node ("" when antctl cannot tell).
func (o *options) agentPodOn(ctx context.Context, node string) string {
	c, err := o.getClients()
	if err != nil {
		return ""
	}
	agents, err := c.Kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: componentLabel + "=" + agentDaemonSet, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return ""
	}
	for _, a := range agents.Items {
		if a.Spec.NodeName == node {
			return a.Name
		}
	}
	return ""
}

// nodeNames lists the cluster's nodes (nil when antctl cannot).
func (o *options) nodeNames(ctx context.Context) []string {
	c, err := o.getClients()
	if err != nil {
		return nil
	}
	list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out
}

// agentAPIPort is apiPort of the antrea-agent.conf in the antrea-config
// ConfigMap, the default when antctl cannot read it.
func (o *options) agentAPIPort(ctx context.Context) int {
	port := agentconfig.Defaults().APIPort
	c, err := o.getClients()
	if err != nil {
		return port
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(antreaNamespace).Get(ctx, antreaConfigMap, metav1.GetOptions{})
	if err != nil {
		return port
	}
	if conf, ok := cm.Data[agentconfig.FileName]; ok {
		if cfg, err := agentconfig.Parse(agentconfig.FileName, []byte(conf)); err == nil && cfg.APIPort != 0 {
			port = cfg.APIPort
		}
	}
	return port
}

// get decodes the JSON answer of GET path?query into v.
func (a *agentClient) get(ctx context.Context, path string, query url.Values, v any) error {
	u := a.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("agent API of node %s: %w; or run it in the antrea-agent container: %s", a.node, err, a.how)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("agent API of node %s: %w", a.node, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return fmt.Errorf("agent API of node %s: 401 Unauthorized: kube-apiserver did not accept the kubeconfig's credentials", a.node)
	case http.StatusForbidden:
		return fmt.Errorf("agent API of node %s: 403 Forbidden: %s (bind the antctl ClusterRole, docs/antctl.md)", a.node, statusMessage(body))
	default:
		return fmt.Errorf("agent API of node %s: GET %s: %s: %s", a.node, path, resp.Status, statusMessage(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("agent API of node %s: GET %s: %w", a.node, path, err)
	}
	return nil
}

// statusMessage is the message of a metav1.Status body, else the body.
func statusMessage(body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return strings.TrimSpace(string(body))
}

// interfaces reads the node's pod interfaces into a store.
func (a *agentClient) interfaces(ctx context.Context) (interfacestore.InterfaceStore, error) {
	var pis []apis.PodInterface
	if err := a.get(ctx, "/podinterfaces", nil, &pis); err != nil {
		return nil, err
	}
	ifs := make([]*interfacestore.InterfaceConfig, 0, len(pis))
	for _, p := range pis {
		c, err := p.InterfaceConfig()
		if err != nil {
			return nil, fmt.Errorf("agent API of node %s: %w", a.node, err)
		}
		ifs = append(ifs, c)
	}
	store := interfacestore.NewInterfaceStore()
	store.Initialize(ifs)
	return store, nil
}

// dumpFlows reads the flows of one table (openflow.TableAll: every table).
func (a *agentClient) dumpFlows(ctx context.Context, table uint8) ([]openflow.FlowStats, error) {
	q := url.Values{}
	if table != openflow.TableAll {
		q.Set("table", strconv.Itoa(int(table)))
	}
	var flows []apis.Flow
	if err := a.get(ctx, "/ovsflows", q, &flows); err != nil {
		return nil, err
	}
	out := make([]openflow.FlowStats, 0, len(flows))
	for _, f := range flows {
		fs, err := f.FlowStats()
		if err != nil {
			return nil, fmt.Errorf("agent API of node %s: %w", a.node, err)
		}
		out = append(out, fs)
	}
	return out, nil
}
