package antctl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"antrea.io/antrea/pkg/antctl/query"
)

// antctl ui: the web UI (cmd/antrea-ui, chart value ui.enable) through a
// port-forward to a Pod of the Service antrea-ui, as kubectl port-forward
// svc/antrea-ui does, for people who do not expose the Service.

const uiService = "antrea-ui"

type uiOptions struct {
	o       *options
	address string
	port    int
	open    bool
}

func newUICommand(o *options) *cobra.Command {
	u := &uiOptions{o: o}
	cmd := &cobra.Command{
		Use:   "ui [--port N] [--open]",
		Short: "Open the Antrea web UI through a port-forward",
		Long: `Forward a local port to the antrea-ui Service (kube-system) and print the
URL of the web UI; --open also opens it in the browser (xdg-open). It runs until
interrupted. The UI is deployed with the chart value ui.enable=true; the first
login's password is in the Secret kube-system/antrea-ui-admin (docs/ui.md).`,
		Example: `  antctl ui
  antctl ui --port 8080 --open`,
		Args: cobra.NoArgs,
		RunE: u.run,
	}
	cmd.Flags().StringVar(&u.address, "address", "127.0.0.1", "Local address to listen on")
	cmd.Flags().IntVar(&u.port, "port", 0, "Local port (0: any free port)")
	cmd.Flags().BoolVar(&u.open, "open", false, "Open the URL in the browser (xdg-open)")
	return cmd
}

// uiBackend finds a ready Pod of the antrea-ui Service and the port it
// serves on.
func uiBackend(ctx context.Context, kube kubernetes.Interface) (*corev1.Pod, int32, error) {
	svc, err := kube.CoreV1().Services(query.AntreaNamespace).Get(ctx, uiService, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, 0, fmt.Errorf("no Service %s/%s: the web UI is not deployed (helm upgrade antrea ... --set ui.enable=true; docs/ui.md)",
			query.AntreaNamespace, uiService)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("service %s/%s: %w", query.AntreaNamespace, uiService, err)
	}
	if len(svc.Spec.Ports) == 0 || len(svc.Spec.Selector) == 0 {
		return nil, 0, fmt.Errorf("service %s/%s has no port or no selector", query.AntreaNamespace, uiService)
	}
	pods, err := kube.CoreV1().Pods(query.AntreaNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return nil, 0, fmt.Errorf("pods of service %s/%s: %w", query.AntreaNamespace, uiService, err)
	}
	target := svc.Spec.Ports[0].TargetPort
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		if target.IntValue() > 0 {
			return p, int32(target.IntValue()), nil
		}
		name := target.String()
		if name == "" || name == "0" {
			return p, svc.Spec.Ports[0].Port, nil
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == name {
					return p, cp.ContainerPort, nil
				}
			}
		}
		return nil, 0, fmt.Errorf("pod %s/%s has no port named %q", p.Namespace, p.Name, name)
	}
	return nil, 0, fmt.Errorf("no ready Pod behind service %s/%s (%d Pods): kubectl -n %s get pods -l component=antrea-ui",
		query.AntreaNamespace, uiService, len(pods.Items), query.AntreaNamespace)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (u *uiOptions) run(cmd *cobra.Command, _ []string) error {
	clients, err := u.o.getClients()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pod, port, err := uiBackend(ctx, clients.Kube)
	if err != nil {
		return err
	}
	cfg, err := u.o.restConfig()
	if err != nil {
		return err
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	pfURL, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	pfURL.Path += fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", pod.Namespace, pod.Name)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, pfURL)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{u.address}, []string{fmt.Sprintf("%d:%d", u.port, port)},
		ctx.Done(), ready, io.Discard, u.o.env.Err)
	if err != nil {
		return fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case err := <-errc:
		return fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	case <-ready:
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		return fmt.Errorf("port-forward: no local port: %v", err)
	}
	link := fmt.Sprintf("http://%s:%d/", u.address, ports[0].Local)
	fmt.Fprintf(u.o.env.Out, "The Antrea web UI: %s (forwarded to pod %s/%s; Ctrl-C stops)\n", link, pod.Namespace, pod.Name)
	fmt.Fprintf(u.o.env.Out, "First login: kubectl -n %s get secret antrea-ui-admin -o jsonpath='{.data.initialPassword}' | base64 -d\n",
		query.AntreaNamespace)
	if u.open {
		opener := exec.Command("xdg-open", link)
		if err := opener.Start(); err != nil {
			fmt.Fprintf(u.o.env.Err, "could not open a browser (%v): open %s yourself\n", err, link)
		} else {
			go func() { _ = opener.Wait() }()
		}
	}
	return <-errc
}
