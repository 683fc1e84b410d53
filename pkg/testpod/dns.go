package testpod

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
	"k8s.io/klog/v2"
)

// A small authoritative DNS server whose answers a test controls: it
// serves the A and AAAA records of one zone from a file it reads again on
// every query, so a test changes an answer by rewriting the file (write a
// temporary file, then rename it over the old one). The lab's outside host
// runs it for the zone lab.test, which the lab's CoreDNS forwards to it;
// toFQDN tests resolve names there and can make a name's addresses change.
//
// The file has one record a line, "NAME TTL A|AAAA ADDRESS", names without
// the trailing dot; blank lines and lines starting with # are skipped.

// ZoneRecord is one line of a zone file.
type ZoneRecord struct {
	Name string
	TTL  uint32
	Addr netip.Addr
}

// ReadZone reads a zone file; a malformed line is an error naming it.
func ReadZone(path string) ([]ZoneRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ZoneRecord
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: want NAME TTL A|AAAA ADDRESS, got %q", path, n, line)
		}
		ttl, err := strconv.ParseUint(fields[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: TTL %q: %w", path, n, fields[1], err)
		}
		addr, err := netip.ParseAddr(fields[3])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: address: %w", path, n, err)
		}
		if kind := strings.ToUpper(fields[2]); (kind == "A") != addr.Is4() || (kind != "A" && kind != "AAAA") {
			return nil, fmt.Errorf("%s:%d: type %q does not fit address %s", path, n, fields[2], addr)
		}
		out = append(out, ZoneRecord{Name: strings.ToLower(strings.TrimSuffix(fields[0], ".")), TTL: uint32(ttl), Addr: addr})
	}
	return out, sc.Err()
}

// WriteZone replaces the zone file at path with records, atomically.
func WriteZone(path string, records []ZoneRecord) error {
	var b strings.Builder
	for _, r := range records {
		kind := "A"
		if !r.Addr.Is4() {
			kind = "AAAA"
		}
		fmt.Fprintf(&b, "%s %d %s %s\n", r.Name, r.TTL, kind, r.Addr)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// DNSConfig says which zone to serve, from which file, where.
type DNSConfig struct {
	// Zone is the domain served ("lab.test"); other names are refused.
	Zone string
	// File is the zone file, read on every query.
	File string
	// Addr is the UDP and TCP address to listen on (host:port).
	Addr string
	// Ready, if set, is closed once both sockets are bound.
	Ready chan<- struct{}
}

// ServeDNS answers until ctx ends.
func ServeDNS(ctx context.Context, cfg DNSConfig) error {
	zone := dns.Fqdn(strings.ToLower(cfg.Zone))
	if cfg.Zone == "" || cfg.File == "" {
		return errors.New("testpod: dns needs a zone and a zone file")
	}
	if _, err := ReadZone(cfg.File); err != nil {
		return fmt.Errorf("testpod: dns: %w", err)
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		_ = w.WriteMsg(answer(req, zone, cfg.File))
	})
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("testpod: dns: %w", err)
	}
	l, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("testpod: dns: %w", err)
	}
	servers := []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: l, Handler: handler}}
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ActivateAndServe(); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "DNS server stopped", "addr", cfg.Addr)
			}
		}()
	}
	klog.InfoS("Serving DNS", "zone", zone, "file", cfg.File, "addr", cfg.Addr)
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
	<-ctx.Done()
	for _, s := range servers {
		_ = s.Shutdown()
	}
	wg.Wait()
	return nil
}

// answer is the reply to one query: the records of the name and type
// asked, NXDOMAIN for a name of the zone without records, REFUSED outside
// the zone, SERVFAIL when the file cannot be read.
func answer(req *dns.Msg, zone, file string) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(zone, name) {
		m.Rcode, m.Authoritative = dns.RcodeRefused, false
		return m
	}
	records, err := ReadZone(file)
	if err != nil {
		klog.ErrorS(err, "Zone file unreadable")
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	known := false
	for _, r := range records {
		if dns.Fqdn(r.Name) != name {
			continue
		}
		known = true
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: r.TTL}
		switch {
		case q.Qtype == dns.TypeA && r.Addr.Is4():
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: r.Addr.AsSlice()})
		case q.Qtype == dns.TypeAAAA && r.Addr.Is6():
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: r.Addr.AsSlice()})
		}
	}
	if !known {
		m.Rcode = dns.RcodeNameError
	}
	return m
}
