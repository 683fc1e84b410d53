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
	"antrea.io/antrea/pkg/util/traceflowip"
)

// A Traceflow (crd.antrea.io/v1beta1, docs/traceflow.md): the source Pod's
// agent injects a packet tagged for it (or tags the Pod's next matching
// packet), every Node it crosses reports what its data plane did, and the
// controller ends it Succeeded or Failed.

// TraceflowRequest is what to trace.
type TraceflowRequest struct {
	// SourceNamespace and SourcePod name the Pod the packet leaves; for
	// live traffic to a Pod, SourcePod may be an IP address instead.
	SourceNamespace, SourcePod string
	// Destination is an IP address, or with DestinationNamespace the name
	// of a Pod or, when no Pod has it, a Service.
	DestinationNamespace, Destination string
	// Packet gives the headers as IPv4's (IPHeader); NewTraceflow moves
	// them to IPv6Header when the packet is IPv6.
	Packet crdv1beta1.Packet
	// IPv6 makes the packet IPv6 (to a dual-stack Pod's or Service's IPv6
	// address). Without it the packet is of the destination IP's family,
	// else IPv4 when the source and the destination have an IPv4 address,
	// else IPv6 (pkg/util/traceflowip).
	IPv6 bool
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
	dest, dstEnd, err := traceflowDestination(ctx, c, r.DestinationNamespace, r.Destination)
	if err != nil {
		return nil, err
	}
	spec.Destination = dest
	var srcEnd traceflowip.End
	if ip, err := netip.ParseAddr(r.SourcePod); err == nil {
		// Live traffic from an address to a Pod: the controller takes it
		// (the destination Pod's agent tags the packet).
		if !r.LiveTraffic || dest.Pod == "" {
			return nil, fmt.Errorf("source %s: an address is a source only of live traffic to a Pod (--live-traffic, -D NS/POD)", ip)
		}
		spec.Source = crdv1beta1.Source{IP: ip.String()}
		srcEnd = traceflowip.End{What: "source", Addrs: []netip.Addr{ip.Unmap()}, Given: true}
	} else {
		if err := checkRole(ctx, c, "source", r.SourceNamespace); err != nil {
			return nil, err
		}
		pod, err := c.Kube.CoreV1().Pods(r.SourceNamespace).Get(ctx, r.SourcePod, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("source Pod %s/%s not found%s", r.SourceNamespace, r.SourcePod,
					suggest.Hint(r.SourcePod, podNames(ctx, c, r.SourceNamespace)))
			}
			return nil, err
		}
		spec.Source = crdv1beta1.Source{Namespace: r.SourceNamespace, Pod: r.SourcePod}
		srcEnd = traceflowip.End{What: fmt.Sprintf("source Pod %s/%s", r.SourceNamespace, r.SourcePod), Addrs: traceflowip.PodAddrs(pod)}
	}
	if spec.Packet, err = packetOfFamily(r.Packet, r.IPv6, srcEnd, dstEnd); err != nil {
		return nil, err
	}
	return &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: traceflowName(r.SourcePod, dest)}, Spec: spec}, nil
}

// traceflowDestination is an IP, else a Pod, else a Service, with its
// addresses.
func traceflowDestination(ctx context.Context, c *Clients, ns, name string) (crdv1beta1.Destination, traceflowip.End, error) {
	none := traceflowip.End{}
	if ip, err := netip.ParseAddr(name); err == nil {
		ip = ip.Unmap()
		return crdv1beta1.Destination{IP: ip.String()}, traceflowip.End{What: "destination", Addrs: []netip.Addr{ip}, Given: true}, nil
	}
	if err := checkRole(ctx, c, "destination", ns); err != nil {
		return crdv1beta1.Destination{}, none, err
	}
	pod, perr := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case perr == nil:
		return crdv1beta1.Destination{Namespace: ns, Pod: name},
			traceflowip.End{What: fmt.Sprintf("destination Pod %s/%s", ns, name), Addrs: traceflowip.PodAddrs(pod)}, nil
	case !apierrors.IsNotFound(perr):
		return crdv1beta1.Destination{}, none, perr
	}
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			names := append(podNames(ctx, c, ns), serviceNames(ctx, c, ns)...)
			return crdv1beta1.Destination{}, none, fmt.Errorf("destination %s/%s: no Pod or Service of that name%s", ns, name, suggest.Hint(name, names))
		}
		return crdv1beta1.Destination{}, none, err
	}
	return crdv1beta1.Destination{Namespace: ns, Service: name}, traceflowip.End{What: fmt.Sprintf("destination Service %s/%s", ns, name),
		Addrs: traceflowip.ServiceAddrs(svc)}, nil
}

// packetOfFamily gives the packet the header of its family: it stays as
// parsed (ipHeader, or none) when IPv4; when IPv6 (v6, or so the
// addresses decide) the fields go to ipv6Header (protocol 1, ICMP, as 58,
// ICMPv6; the TTL as the hop limit), which is set even when empty, as
// upstream's Traceflow needs it to trace IPv6 to a dual-stack Pod. A
// source and destination of no common family are refused here, as the
// controller would.
func packetOfFamily(p crdv1beta1.Packet, v6 bool, src, dst traceflowip.End) (crdv1beta1.Packet, error) {
	family := traceflowip.IPv4
	if v6 {
		family = traceflowip.IPv6
	} else if len(dst.Addrs) > 0 {
		f, _, _, err := traceflowip.Pick(&crdv1beta1.Packet{}, src, dst)
		if err != nil {
			return p, err
		}
		family = f
	}
	if family == traceflowip.IPv4 {
		return p, nil
	}
	h := &crdv1beta1.IPv6Header{}
	if ih := p.IPHeader; ih != nil {
		if ih.Flags != 0 {
			return p, fmt.Errorf("IPv4 flags %d in an IPv6 packet: IPv6 has no such flags", ih.Flags)
		}
		h.HopLimit = ih.TTL
		if ih.Protocol != 0 {
			next := ih.Protocol
			if next == 1 {
				next = 58
			}
			h.NextHeader = &next
		}
	}
	p.IPHeader, p.IPv6Header = nil, h
	if len(dst.Addrs) > 0 {
		if _, _, _, err := traceflowip.Pick(&p, src, dst); err != nil {
			return p, err
		}
	}
	return p, nil
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
