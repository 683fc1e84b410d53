package antctl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/flowaggregator"
	"antrea.io/antrea/pkg/ipfix"
)

// antctl get flows: the Flow Aggregator's latest records, read from its
// HTTP API through a port-forward to a ready Pod of its Service (as antctl
// ui reaches the web UI), so it works wherever kubectl port-forward does.

func newGetFlowsCommand(g *getOptions) *cobra.Command {
	var q query.FlowQuery
	cmd := &cobra.Command{
		Use:   "flows [--pod POD] [-n NAMESPACE] [--policy NAME] [--denied]",
		Short: "Show the Flow Aggregator's latest flow records",
		Long: `Show the connections the agents' FlowExporter reported, as the Flow Aggregator
(build/yamls/flow-aggregator.yml; antrea-lab up --flow-visibility) joined them: both Pods
and Nodes of an inter-node connection in one record, the Service, the bytes each way.
Filters: --pod (either side; NAME or NAMESPACE/NAME), -n (either side's namespace,
only when given), --policy (the NetworkPolicy on either side), --denied.`,
		Example: `  antctl get flows
  antctl get flows -n web --pod frontend-0
  antctl get flows --denied -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ns, explicit := g.namespace(); explicit {
				q.Namespace = ns
			}
			c, err := g.getClients()
			if err != nil {
				return err
			}
			get := func(ctx context.Context, path string, params url.Values) ([]byte, error) {
				return g.flowAggregatorGet(ctx, c.Kube, path, params)
			}
			fs, err := query.Flows(cmd.Context(), get, q)
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, fs)
			}
			return writeFlowsTable(g.env.Out, fs)
		},
	}
	cmd.Flags().StringVar(&q.Pod, "pod", "", "Only records of this Pod (either side): NAME or NAMESPACE/NAME")
	cmd.Flags().StringVar(&q.Policy, "policy", "", "Only records a NetworkPolicy of this name (or NAMESPACE/NAME) allowed or denied")
	cmd.Flags().BoolVar(&q.Denied, "denied", false, "Only records of denied connections")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "The newest N records (0: all the aggregator holds)")
	return cmd
}

// writeFlowsTable prints one row per record.
func writeFlowsTable(w io.Writer, fs []flowaggregator.Flow) error {
	t := &table{header: []string{"SOURCE", "DESTINATION", "PROTO", "SERVICE", "TYPE", "BYTES", "REV-BYTES", "STATE", "POLICY", "END"}}
	for _, f := range fs {
		c := flowCounts(f)
		var pols []string
		for _, p := range []string{policyCell("egress", f.EgressPolicy, f.EgressPolicyRule, f.EgressPolicyAction),
			policyCell("ingress", f.IngressPolicy, f.IngressPolicyRule, f.IngressPolicyAction)} {
			if p != "" {
				pols = append(pols, p)
			}
		}
		pol := strings.Join(pols, " ")
		t.add(flowEnd(f.SrcNamespace, f.SrcPod, f.SrcIP.String(), f.SrcPort),
			flowEnd(f.DstNamespace, f.DstPod, f.DstIP.String(), f.DstPort),
			protoName(f.Protocol), orNone(f.Service), flowTypeName(f.FlowType),
			strconv.FormatUint(c.Total.Bytes, 10), strconv.FormatUint(c.ReverseTotal.Bytes, 10),
			orNone(f.TCPState), orNone(pol), f.End.Local().Format(time.TimeOnly))
	}
	return t.write(w)
}

// policyCell names one direction's rule in the POLICY column: the
// direction, its action when it is not an allow (Drop, Reject, upper case),
// the policy and, when it has one, the rule: "ingress:Drop:deny-web/drop-client",
// "egress:ns/allow-out". The isolation of K8s NetworkPolicies has no rule.
func policyCell(dir, policy, rule string, action uint8) string {
	if policy == "" && action == 0 {
		return ""
	}
	out := dir + ":"
	switch action {
	case ipfix.RuleActionDrop:
		out += "DROP:"
	case ipfix.RuleActionReject:
		out += "REJECT:"
	}
	if policy == "" {
		policy = "<isolation>"
	}
	out += policy
	if rule != "" {
		out += "/" + rule
	}
	return out
}

// flowCounts are the source node's counts, else the destination node's.
func flowCounts(f flowaggregator.Flow) flowaggregator.NodeCounts {
	if f.FromSource != nil {
		return *f.FromSource
	}
	if f.FromDestination != nil {
		return *f.FromDestination
	}
	return flowaggregator.NodeCounts{}
}

func flowEnd(ns, pod, ip string, port uint16) string {
	addr := ip + ":" + strconv.Itoa(int(port))
	if strings.Contains(ip, ":") {
		addr = "[" + ip + "]:" + strconv.Itoa(int(port))
	}
	if pod == "" {
		return addr
	}
	return ns + "/" + pod + " (" + addr + ")"
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	case 1, 58:
		return "ICMP"
	}
	return strconv.Itoa(int(p))
}

func flowTypeName(t uint8) string {
	switch t {
	case ipfix.FlowTypeIntraNode:
		return "intra-node"
	case ipfix.FlowTypeInterNode:
		return "inter-node"
	case ipfix.FlowTypeToExternal:
		return "to-external"
	case ipfix.FlowTypeFromExternal:
		return "from-external"
	}
	return "-"
}

// flowAggregatorGet GETs path of the aggregator's API through a
// port-forward to a ready Pod of its Service, opened for the request.
func (o *options) flowAggregatorGet(ctx context.Context, kube kubernetes.Interface, path string, params url.Values) ([]byte, error) {
	ns, name := query.FlowAggregatorNamespace, query.FlowAggregatorService
	svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no Service %s/%s: the Flow Aggregator is not deployed (kubectl apply -f build/yamls/flow-aggregator.yml; docs/flow-export.md)", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == query.FlowAggregatorAPIPort {
			port = p.TargetPort.IntVal
			if port == 0 {
				port = p.Port
			}
		}
	}
	if port == 0 || len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("service %s/%s has no port %q or no selector", ns, name, query.FlowAggregatorAPIPort)
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return nil, fmt.Errorf("pods of service %s/%s: %w", ns, name, err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && podReady(p) {
			pod = p
			break
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("no ready Pod behind service %s/%s (%d Pods): kubectl -n %s get pods -l app=flow-aggregator", ns, name, len(pods.Items), ns)
	}
	// The Service's target port may be named: the container's.
	for _, tp := range svc.Spec.Ports {
		if tp.Name == query.FlowAggregatorAPIPort && tp.TargetPort.StrVal != "" {
			for _, c := range pod.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == tp.TargetPort.StrVal {
						port = cp.ContainerPort
					}
				}
			}
		}
	}
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	pfURL, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	pfURL.Path += fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", pod.Namespace, pod.Name)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, pfURL)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case err := <-errc:
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	case <-ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		return nil, fmt.Errorf("port-forward: no local port: %v", err)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d%s", ports[0].Local, path)
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("flow aggregator API (pod %s/%s): %w", pod.Namespace, pod.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("flow aggregator API: GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
