package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/antctl/query"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// The Pipeline page's packet counts come from the chosen Node's agent API
// (pkg/agent/apiserver, GET /ovsflows: every flow with its counters), as
// antctl get pipeline --node reads them: HTTPS to the Node's InternalIP on
// the agent's apiPort, with the session's credentials (the UI's service
// account, or the user's token), which the agent has kube-apiserver review
// and authorize (nonResourceURL /ovsflows, get). The agent's certificate is
// self-signed: not verified, as antctl does not.

// agentAPITimeout bounds one read of a Node's flows.
const agentAPITimeout = 8 * time.Second

// agentAddress is the URL of node's agent API ("" with why when unknown).
func agentAddress(ctx context.Context, c *query.Clients, node string) (string, error) {
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
			break
		}
	}
	if ip == "" {
		return "", fmt.Errorf("node %s has no InternalIP to reach its agent API at", node)
	}
	port := agentconfig.Defaults().APIPort
	if cm, err := c.Kube.CoreV1().ConfigMaps(query.AntreaNamespace).Get(ctx, query.AntreaConfigMap, metav1.GetOptions{}); err == nil {
		if conf, ok := cm.Data[agentconfig.FileName]; ok {
			if cfg, err := agentconfig.Parse(agentconfig.FileName, []byte(conf)); err == nil && cfg.APIPort != 0 {
				port = cfg.APIPort
			}
		}
	}
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(port)), nil
}

// agentFlows reads every flow of node's OVS with its counters.
func agentFlows(ctx context.Context, cfg *rest.Config, c *query.Clients, node string) ([]openflow.FlowStats, error) {
	if cfg == nil {
		return nil, fmt.Errorf("no API server configuration to reach the agent API with")
	}
	base, err := agentAddress(ctx, c, node)
	if err != nil {
		return nil, err
	}
	ac := rest.CopyConfig(cfg)
	ac.Host, ac.APIPath = base, ""
	ac.TLSClientConfig.Insecure = true
	ac.TLSClientConfig.CAFile, ac.TLSClientConfig.CAData, ac.TLSClientConfig.ServerName = "", nil, ""
	rt, err := rest.TransportFor(ac)
	if err != nil {
		return nil, fmt.Errorf("agent API of node %s: %w", node, err)
	}
	ctx, cancel := context.WithTimeout(ctx, agentAPITimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ovsflows", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent API of node %s: %w", node, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("agent API of node %s: %w", node, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return nil, fmt.Errorf("agent API of node %s: GET /ovsflows: %s: %s", node, resp.Status, msg)
	}
	var flows []apis.Flow
	if err := json.Unmarshal(body, &flows); err != nil {
		return nil, fmt.Errorf("agent API of node %s: GET /ovsflows: %w", node, err)
	}
	out := make([]openflow.FlowStats, 0, len(flows))
	for _, f := range flows {
		fs, err := f.FlowStats()
		if err != nil {
			return nil, fmt.Errorf("agent API of node %s: %w", node, err)
		}
		out = append(out, fs)
	}
	return out, nil
}
