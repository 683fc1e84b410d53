package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/util/suggest"
)

// A Traceflow (crd.antrea.io/v1beta1, docs/traceflow.md): the source Pod's
// agent injects a packet tagged for it (or tags the Pod's next matching
// packet), every Node it crosses reports what its data plane did, and the
// controller ends it Succeeded or Failed.

// TraceflowRequest is what to trace.
type TraceflowRequest struct {
	// SourceNamespace and SourcePod name the Pod the packet leaves; for
	// live traffic to a Pod, SourcePod may be an IPv4 address instead.
	SourceNamespace, SourcePod string
	// Destination is an IPv4 address, or with DestinationNamespace the name
	// of a Pod or, when no Pod has it, a Service.
	DestinationNamespace, Destination string
	Packet                            crdv1beta1.Packet
	// LiveTraffic traces the source's next real packet that matches;
	// DroppedOnly then reports only a dropped one.
	LiveTraffic, DroppedOnly bool
	// Timeout is how long the trace may take (whole seconds).
	Timeout time.Duration
}

// NewTraceflow checks the request against the cluster (the source Pod, the
// destination Pod, Service or address exist, with the closest name for a
// typo) and returns the Traceflow to create, with a generated name.
func NewTraceflow(ctx context.Context, c *Clients, r TraceflowRequest) (*crdv1beta1.Traceflow, error) {
	if r.DroppedOnly && !r.LiveTraffic {
		return nil, fmt.Errorf("a dropped-only Traceflow traces live traffic")
	}
	spec := crdv1beta1.TraceflowSpec{Packet: r.Packet, LiveTraffic: r.LiveTraffic, DroppedOnly: r.DroppedOnly,
		Timeout: int32(r.Timeout / time.Second)}
	dest, err := traceflowDestination(ctx, c, r.DestinationNamespace, r.Destination)
	if err != nil {
		return nil, err
	}
	spec.Destination = dest
	if ip, err := netip.ParseAddr(r.SourcePod); err == nil {
		// Live traffic from an address to a Pod: the controller takes it
		// (the destination Pod's agent tags the packet).
		if !r.LiveTraffic || dest.Pod == "" {
			return nil, fmt.Errorf("source %s: an address is a source only of live traffic to a Pod (--live-traffic, -D NS/POD)", ip)
		}
		spec.Source = crdv1beta1.Source{IP: ip.String()}
	} else {
		if err := checkRole(ctx, c, "source", r.SourceNamespace); err != nil {
			return nil, err
		}
		if _, err := c.Kube.CoreV1().Pods(r.SourceNamespace).Get(ctx, r.SourcePod, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("source Pod %s/%s not found%s", r.SourceNamespace, r.SourcePod,
					suggest.Hint(r.SourcePod, podNames(ctx, c, r.SourceNamespace)))
			}
			return nil, err
		}
		spec.Source = crdv1beta1.Source{Namespace: r.SourceNamespace, Pod: r.SourcePod}
	}
	return &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: traceflowName(r.SourcePod, dest)}, Spec: spec}, nil
}

// traceflowDestination is an IP, else a Pod, else a Service.
func traceflowDestination(ctx context.Context, c *Clients, ns, name string) (crdv1beta1.Destination, error) {
	if ip, err := netip.ParseAddr(name); err == nil {
		if !ip.Is4() {
			return crdv1beta1.Destination{}, fmt.Errorf("destination %s: Traceflow traces IPv4 only", ip)
		}
		return crdv1beta1.Destination{IP: ip.String()}, nil
	}
	if err := checkRole(ctx, c, "destination", ns); err != nil {
		return crdv1beta1.Destination{}, err
	}
	_, perr := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case perr == nil:
		return crdv1beta1.Destination{Namespace: ns, Pod: name}, nil
	case !apierrors.IsNotFound(perr):
		return crdv1beta1.Destination{}, perr
	}
	if _, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			names := append(podNames(ctx, c, ns), serviceNames(ctx, c, ns)...)
			return crdv1beta1.Destination{}, fmt.Errorf("destination %s/%s: no Pod or Service of that name%s", ns, name, suggest.Hint(name, names))
		}
		return crdv1beta1.Destination{}, err
	}
	return crdv1beta1.Destination{Namespace: ns, Service: name}, nil
}

// RunTraceflow creates tf, waits (polling every poll) until the controller
// ends it, Succeeded or Failed, and returns it; unless keep, it is deleted
// then. A Traceflow that does not end within its timeout and 5 s more is
// returned as it stands, with the error saying so.
func RunTraceflow(ctx context.Context, c *Clients, tf *crdv1beta1.Traceflow, poll time.Duration, keep bool) (*crdv1beta1.Traceflow, error) {
	tfs := c.Antrea.CrdV1beta1().Traceflows()
	created, err := tfs.Create(ctx, tf, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Traceflow: %w", err)
	}
	if !keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tfs.Delete(dctx, created.Name, metav1.DeleteOptions{})
		}()
	}
	timeout := time.Duration(tf.Spec.Timeout) * time.Second
	deadline := time.Now().Add(timeout + 5*time.Second)
	for {
		got, err := tfs.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read Traceflow %s: %w", created.Name, err)
		}
		if got.Status.Phase == crdv1beta1.TraceflowSucceeded || got.Status.Phase == crdv1beta1.TraceflowFailed {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("traceflow %s did not finish within %s (phase %q)", got.Name, timeout, got.Status.Phase)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func checkRole(ctx context.Context, c *Clients, role, ns string) error {
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s Namespace %s not found%s", role, ns, suggest.Hint(ns, namespaceNames(ctx, c.Kube)))
		}
		return err
	}
	return nil
}

func podNames(ctx context.Context, c *Clients, ns string) []string {
	l, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return namesOf(l.Items, func(p *corev1.Pod) string { return p.Name })
}

func serviceNames(ctx context.Context, c *Clients, ns string) []string {
	l, err := c.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return namesOf(l.Items, func(s *corev1.Service) string { return s.Name })
}

// namesOf lists the names of items.
func namesOf[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	return out
}

var nameCleaner = regexp.MustCompile(`[^a-z0-9-]+`)

// traceflowName is "<source>-to-<destination>-<random>", a valid name.
func traceflowName(src string, d crdv1beta1.Destination) string {
	dst := d.Pod + d.Service + d.IP
	base := nameCleaner.ReplaceAllString(strings.ToLower(src+"-to-"+dst), "-")
	if len(base) > 200 {
		base = base[:200]
	}
	return strings.Trim(base, "-") + "-" + strconv.FormatUint(rand.Uint64()%(1<<40), 36)
}
