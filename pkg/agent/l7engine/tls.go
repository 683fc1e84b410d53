package l7engine

import (
	"encoding/binary"
	"errors"
)

// maxClientHello bounds the handshake bytes held until a ClientHello is
// whole.
const maxClientHello = 64 << 10

var errNotTLS = errors.New("not a TLS ClientHello")

// clientHelloSNI reads the server name of the ClientHello at the start of
// a client's stream (RFC 8446 section 4.1.2, RFC 6066 section 3), which may
// span several handshake records. complete is false while buf holds too
// little; n is how many stream bytes the ClientHello's records take. The
// name is "" when the client sent no server_name extension.
func clientHelloSNI(buf []byte) (sni string, n int, complete bool, err error) {
	var hs []byte // the handshake messages, out of their records
	for off := 0; ; {
		if len(buf)-off < 5 {
			if off == 0 && len(buf) > 0 && buf[0] != 0x16 {
				return "", 0, false, errNotTLS
			}
			return "", 0, false, nil
		}
		if buf[off] != 0x16 || buf[off+1] != 3 {
			return "", 0, false, errNotTLS
		}
		rl := int(binary.BigEndian.Uint16(buf[off+3 : off+5]))
		if len(buf)-off-5 < rl {
			if len(buf) > maxClientHello {
				return "", 0, false, errors.New("ClientHello too long")
			}
			return "", 0, false, nil
		}
		hs = append(hs, buf[off+5:off+5+rl]...)
		off += 5 + rl
		if len(hs) >= 4 {
			if hs[0] != 1 {
				return "", 0, false, errNotTLS
			}
			ml := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if ml > maxClientHello {
				return "", 0, false, errors.New("ClientHello too long")
			}
			if len(hs) >= 4+ml {
				sni, err := parseClientHello(hs[4 : 4+ml])
				return sni, off, err == nil, err
			}
		}
	}
}

// parseClientHello reads the server_name extension of a ClientHello body.
func parseClientHello(b []byte) (string, error) {
	bad := errors.New("malformed ClientHello")
	// legacy_version(2) random(32)
	if len(b) < 34 {
		return "", bad
	}
	b = b[34:]
	skip := func(lenBytes int) bool {
		if len(b) < lenBytes {
			return false
		}
		l := 0
		for i := 0; i < lenBytes; i++ {
			l = l<<8 | int(b[i])
		}
		if len(b) < lenBytes+l {
			return false
		}
		b = b[lenBytes+l:]
		return true
	}
	if !skip(1) || !skip(2) || !skip(1) { // session id, cipher suites, compression methods
		return "", bad
	}
	if len(b) == 0 {
		return "", nil // no extensions
	}
	if len(b) < 2 {
		return "", bad
	}
	exts := b[2:]
	if el := int(binary.BigEndian.Uint16(b[:2])); el <= len(exts) {
		exts = exts[:el]
	} else {
		return "", bad
	}
	for len(exts) >= 4 {
		typ, l := binary.BigEndian.Uint16(exts[:2]), int(binary.BigEndian.Uint16(exts[2:4]))
		if len(exts) < 4+l {
			return "", bad
		}
		body := exts[4 : 4+l]
		exts = exts[4+l:]
		if typ != 0 { // server_name
			continue
		}
		if len(body) < 2 {
			return "", bad
		}
		list := body[2:]
		for len(list) >= 3 {
			nt, nl := list[0], int(binary.BigEndian.Uint16(list[1:3]))
			if len(list) < 3+nl {
				return "", bad
			}
			if nt == 0 { // host_name
				return string(list[3 : 3+nl]), nil
			}
			list = list[3+nl:]
		}
		return "", nil
	}
	return "", nil
}
