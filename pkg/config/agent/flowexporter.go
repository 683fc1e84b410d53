package agent

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Transports of flowExporter.flowCollectorAddr.
const (
	TransportTCP  = "tcp"
	TransportUDP  = "udp"
	TransportTLS  = "tls"
	TransportGRPC = "grpc"
	// DefaultCollectorPort is IPFIX's port (RFC 7011 section 10).
	DefaultCollectorPort = 4739
)

// CollectorAddr is flowExporter.flowCollectorAddr, parsed.
type CollectorAddr struct {
	// Host is an IP, a DNS name, or "" when Service is set.
	Host string
	// ServiceNamespace/ServiceName name an in-cluster collector.
	ServiceNamespace, ServiceName string
	Port                          int
	Transport                     string
}

// HostPort is Host and Port joined (for a Host, not a Service).
func (a CollectorAddr) HostPort() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}

// ParseCollectorAddr parses HOST[:PORT][:PROTO] as upstream does: an IPv6
// HOST in brackets, PORT 4739 and PROTO tls when omitted.
func ParseCollectorAddr(s string) (CollectorAddr, error) {
	a := CollectorAddr{Port: DefaultCollectorPort, Transport: TransportTLS}
	rest := s
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return a, fmt.Errorf("%q: an IPv6 address without its closing bracket", s)
		}
		a.Host, rest = s[1:end], s[end+1:]
		if net.ParseIP(a.Host) == nil {
			return a, fmt.Errorf("%q: %q is not an IPv6 address", s, a.Host)
		}
		if rest != "" && rest[0] != ':' {
			return a, fmt.Errorf("%q: want [IPv6]:PORT", s)
		}
		rest = strings.TrimPrefix(rest, ":")
	} else {
		var host string
		host, rest, _ = strings.Cut(s, ":")
		if host == "" {
			return a, fmt.Errorf("%q has no host", s)
		}
		if ns, name, ok := strings.Cut(host, "/"); ok {
			for _, n := range []string{ns, name} {
				if msgs := validation.IsDNS1123Label(n); len(msgs) > 0 {
					return a, fmt.Errorf("%q: %q is not a Service namespace/name: %s", s, host, strings.Join(msgs, "; "))
				}
			}
			a.ServiceNamespace, a.ServiceName = ns, name
		} else {
			if net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
				return a, fmt.Errorf("%q: %q is not an IP address, a DNS name or a Service namespace/name", s, host)
			}
			a.Host = host
		}
	}
	port, proto, hasProto := strings.Cut(rest, ":")
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return a, fmt.Errorf("%q: %q is not a port (want 1 to 65535)", s, port)
		}
		a.Port = n
	}
	if hasProto {
		switch proto {
		case TransportTCP, TransportUDP, TransportTLS, TransportGRPC:
			a.Transport = proto
		default:
			return a, fmt.Errorf("%q: %q is not a transport (want grpc, tls, tcp or udp)", s, proto)
		}
	}
	return a, nil
}

// FlowTimes are the flowExporter section's durations, parsed (Load
// validated them).
type FlowTimes struct{ Poll, Active, Idle time.Duration }

// Times returns the section's durations.
func (f FlowExporterConfig) Times() FlowTimes {
	d := func(s string, def time.Duration) time.Duration {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			return def
		}
		return v
	}
	return FlowTimes{Poll: d(f.FlowPollInterval, 5*time.Second), Active: d(f.ActiveFlowExportTimeout, 5*time.Second),
		Idle: d(f.IdleFlowExportTimeout, 15*time.Second)}
}

// validate checks the section.
func (f FlowExporterConfig) validate(enabled bool) []error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("flowExporter.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, err := ParseCollectorAddr(f.FlowCollectorAddr); err != nil {
		fail("flowCollectorAddr", "%v", err)
	}
	for _, k := range []struct{ key, v string }{{"flowPollInterval", f.FlowPollInterval},
		{"activeFlowExportTimeout", f.ActiveFlowExportTimeout}, {"idleFlowExportTimeout", f.IdleFlowExportTimeout}} {
		if d, err := time.ParseDuration(k.v); err != nil || d < time.Second {
			fail(k.key, "%q is not a duration of at least 1s (e.g. 5s)", k.v)
		}
	}
	return errs
}
