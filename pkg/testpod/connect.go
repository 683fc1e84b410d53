package testpod

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// Verdict is the one-word outcome of a probe.
type Verdict string

// The verdicts and, through ExitCode, the client's exit status:
//
//	connected  0  a TCP handshake completed, or a UDP reply came back
//	refused    1  the network said no: TCP RST, an ICMP error (port, host or
//	              network unreachable, administratively prohibited), or no route
//	timeout    2  nothing came back before the timeout
//
// Exit status 3 means the probe could not run (bad flags, unsupported protocol).
const (
	Connected Verdict = "connected"
	Refused   Verdict = "refused"
	Timeout   Verdict = "timeout"
)

// ExitCodeError is the exit status for a probe that could not run.
const ExitCodeError = 3

// ExitCode is the process exit status that stands for the verdict.
func (v Verdict) ExitCode() int {
	switch v {
	case Connected:
		return 0
	case Refused:
		return 1
	case Timeout:
		return 2
	}
	return ExitCodeError
}

// ConnectConfig describes one probe.
type ConnectConfig struct {
	// Protocol is "tcp" or "udp".
	Protocol string
	// To is HOST:PORT.
	To string
	// Timeout bounds the whole probe.
	Timeout time.Duration
}

// Result is a probe's outcome.
type Result struct {
	Verdict Verdict
	// Name is what the server answered with (empty if it did not answer).
	Name string
	// Err is the underlying error for refused and timeout verdicts.
	Err error
}

// String is the line the client prints: the verdict, then the answering name.
func (r Result) String() string {
	if r.Name != "" {
		return string(r.Verdict) + " " + r.Name
	}
	return string(r.Verdict)
}

// Connect runs one probe. The error is for probes that could not run at all;
// network outcomes are in the Result.
func Connect(ctx context.Context, cfg ConnectConfig) (Result, error) {
	if cfg.Timeout <= 0 {
		return Result{}, fmt.Errorf("testpod: connect %s: timeout must be positive", cfg.To)
	}
	if _, _, err := net.SplitHostPort(cfg.To); err != nil {
		return Result{}, fmt.Errorf("testpod: connect %q: %w", cfg.To, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	switch strings.ToLower(cfg.Protocol) {
	case "tcp":
		return connectTCP(ctx, cfg.To), nil
	case "udp":
		return connectUDP(ctx, cfg.To)
	default:
		return Result{}, fmt.Errorf("testpod: connect %s: unsupported protocol %q (tcp or udp)", cfg.To, cfg.Protocol)
	}
}

func connectTCP(ctx context.Context, to string) Result {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return Result{Verdict: classify(err), Err: err}
	}
	defer c.Close()
	// The handshake completed: connected, whatever the server says next.
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return Result{Verdict: Connected, Name: strings.TrimSpace(line)}
}

// udpRetryInterval spaces the UDP probes: the first datagram may be lost
// while a neighbour or tunnel entry resolves, so one send is not enough.
const udpRetryInterval = 200 * time.Millisecond

func connectUDP(ctx context.Context, to string) (Result, error) {
	var d net.Dialer
	// A connected UDP socket is what makes ICMP errors visible as read errors.
	c, err := d.DialContext(ctx, "udp", to)
	if err != nil {
		return Result{Verdict: classify(err), Err: err}, nil
	}
	defer c.Close()
	buf := make([]byte, 64*1024)
	for {
		if _, err := c.Write([]byte("probe\n")); err != nil {
			if v := classify(err); v == Refused {
				return Result{Verdict: v, Err: err}, nil
			}
		}
		next := time.Now().Add(udpRetryInterval)
		if dl, ok := ctx.Deadline(); ok && dl.Before(next) {
			next = dl
		}
		_ = c.SetReadDeadline(next)
		n, err := c.Read(buf)
		if err == nil {
			return Result{Verdict: Connected, Name: strings.TrimSpace(string(buf[:n]))}, nil
		}
		if v := classify(err); v == Refused {
			return Result{Verdict: Refused, Err: err}, nil
		}
		if ctx.Err() != nil {
			return Result{Verdict: Timeout, Err: ctx.Err()}, nil
		}
	}
}

// classify maps a socket error to a verdict: errors that only an answer from
// the network (or the local routing table) can cause are refusals, the rest
// is silence.
func classify(err error) Verdict {
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, errno) {
			return Refused
		}
	}
	return Timeout
}
