package networkpolicy

import (
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"antrea.io/antrea/pkg/agent/packetreply"
)

// DefaultAuditLogDir is where the agent writes np.log, as upstream does.
const DefaultAuditLogDir = "/var/log/antrea/networkpolicy"

// auditLogger writes one line per packet a logging rule decided on, in
// upstream Antrea's format (pkg/agent/controller/networkpolicy/audit_logging.go):
//
//	<date> <time> <table> <policy> <rule name> <direction> <action> <OpenFlow priority> <applied-to pod> <src IP> <src port> <dst IP> <dst port> <protocol> <IP length> <log label>
//
// with <nil> for what is unknown. Lines of Drop and Reject are
// deduplicated: the same line within dedupWindow of its first packet is
// written once when the window ends, followed by "[N packets in D]" when
// there were several. Allow and Pass lines are written at once.
type auditLogger struct {
	out         *log.Logger
	dedupWindow time.Duration

	mu      sync.Mutex
	pending map[string]*dedupRecord
}

type dedupRecord struct {
	count int
	first time.Time
}

// newAuditLogger writes to dir/np.log, rotated by lumberjack (100 MB, 3
// backups, 28 days, compressed: upstream's defaults).
func newAuditLogger(dir string) (*auditLogger, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("audit log directory %s: %w", dir, err)
	}
	return newAuditLoggerTo(&lumberjack.Logger{Filename: filepath.Join(dir, "np.log"), MaxSize: 100, MaxBackups: 3,
		MaxAge: 28, Compress: true}, time.Second), nil
}

func newAuditLoggerTo(w io.Writer, window time.Duration) *auditLogger {
	return &auditLogger{out: log.New(w, "", log.Ldate|log.Lmicroseconds), dedupWindow: window, pending: map[string]*dedupRecord{}}
}

// auditEntry is what one line says.
type auditEntry struct {
	table, policy, rule, direction, action, priority, appliedTo string
	src, dst                                                    netip.Addr
	srcPort, dstPort                                            string
	protocol, length, label                                     string
	// extra, if set, follows the line's fields (the layer 7 engine's
	// request: l7.go).
	extra string
}

func orNil(s string) string {
	if s == "" {
		return "<nil>"
	}
	return s
}

func (e *auditEntry) line() string {
	fields := []string{orNil(e.table), orNil(e.policy), orNil(e.rule), orNil(e.direction), orNil(e.action),
		orNil(e.priority), orNil(e.appliedTo), e.src.String(), orNil(e.srcPort), e.dst.String(), orNil(e.dstPort),
		orNil(e.protocol), orNil(e.length), orNil(e.label)}
	if e.extra != "" {
		fields = append(fields, e.extra)
	}
	return strings.Join(fields, " ")
}

func (l *auditLogger) log(e *auditEntry) {
	msg := e.line()
	if e.action == "Allow" || e.action == "Pass" {
		l.out.Print(msg)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.pending[msg]; ok {
		r.count++
		return
	}
	l.pending[msg] = &dedupRecord{count: 1, first: time.Now()}
	time.AfterFunc(l.dedupWindow, func() { l.flush(msg) })
}

func (l *auditLogger) flush(msg string) {
	l.mu.Lock()
	r := l.pending[msg]
	delete(l.pending, msg)
	l.mu.Unlock()
	if r.count == 1 {
		l.out.Print(msg)
		return
	}
	l.out.Printf("%s [%d packets in %s]", msg, r.count, time.Since(r.first))
}

// protocolName is upstream's name of an IP protocol in log lines.
func protocolName(p byte) string {
	switch p {
	case packetreply.ProtoICMP:
		return "ICMP"
	case packetreply.ProtoTCP:
		return "TCP"
	case packetreply.ProtoUDP:
		return "UDP"
	case packetreply.ProtoSCTP:
		return "SCTP"
	case packetreply.ProtoICMPv6:
		return "IPv6-ICMP" // IANA's keyword
	}
	return "UnknownProtocol"
}

func portString(p uint16) string { return strconv.Itoa(int(p)) }
