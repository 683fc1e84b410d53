package l7engine

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxHTTPHead bounds a request head (request line and headers) the engine
// holds while it is incomplete; a longer one is denied.
const maxHTTPHead = 64 << 10

var errNotHTTP = errors.New("not an HTTP/1.x request")

// httpState is where the parser is in the client's stream.
type httpState int

const (
	httpHead      httpState = iota // before a request head
	httpBody                       // in a Content-Length body
	httpChunkSize                  // before a chunk-size line
	httpChunkData                  // in a chunk's data and its CRLF
	httpTrailer                    // in the trailer section of a chunked body
)

// httpParser follows the requests of one connection's client stream
// (RFC 9112): it reads each request head and skips each body by its
// framing, so that every request of a keep-alive or pipelined connection
// is seen.
type httpParser struct {
	state httpState
	// remaining bytes of the body or of the chunk (its CRLF included).
	remaining int64
}

// step reads from the start of buf, the stream's undecided bytes. It
// returns how many bytes it consumed and, when those bytes are a request
// head, the request (the caller decides on it before calling again); n is 0
// when buf holds too little to go on. Body and framing bytes are consumed
// without a request: they belong to the request allowed before them.
func (h *httpParser) step(buf []byte) (n int, req *HTTPRequest, err error) {
	switch h.state {
	case httpHead:
		if len(buf) > 0 && (buf[0] < 'A' || buf[0] > 'Z') {
			return 0, nil, errNotHTTP
		}
		end := bytes.Index(buf, []byte("\r\n\r\n"))
		if end < 0 {
			if len(buf) > maxHTTPHead {
				return 0, nil, fmt.Errorf("request head longer than %d bytes", maxHTTPHead)
			}
			if i := bytes.IndexByte(buf, ' '); i < 0 && len(buf) > 32 || i > 32 {
				return 0, nil, errNotHTTP // no method token is that long
			}
			return 0, nil, nil
		}
		r, framing, err := parseRequestHead(buf[:end])
		if err != nil {
			return 0, nil, err
		}
		switch {
		case framing.chunked:
			h.state = httpChunkSize
		case framing.length > 0:
			h.state, h.remaining = httpBody, framing.length
		}
		return end + 4, r, nil
	case httpBody, httpChunkData:
		n := int64(len(buf))
		if n > h.remaining {
			n = h.remaining
		}
		h.remaining -= n
		if h.remaining == 0 {
			if h.state == httpBody {
				h.state = httpHead
			} else {
				h.state = httpChunkSize
			}
		}
		return int(n), nil, nil
	case httpChunkSize:
		end := bytes.Index(buf, []byte("\r\n"))
		if end < 0 {
			if len(buf) > 1024 {
				return 0, nil, errors.New("chunk-size line too long")
			}
			return 0, nil, nil
		}
		line := string(buf[:end])
		if i := strings.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil || size < 0 {
			return 0, nil, fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			h.state = httpTrailer
		} else {
			h.state, h.remaining = httpChunkData, size+2
		}
		return end + 2, nil, nil
	case httpTrailer:
		end := bytes.Index(buf, []byte("\r\n"))
		if end < 0 {
			if len(buf) > maxHTTPHead {
				return 0, nil, errors.New("trailer too long")
			}
			return 0, nil, nil
		}
		if end == 0 {
			h.state = httpHead
		}
		return end + 2, nil, nil
	}
	return 0, nil, fmt.Errorf("http parser in state %d", h.state)
}

// bodyFraming says how a request's body is delimited.
type bodyFraming struct {
	chunked bool
	length  int64
}

// parseRequestHead reads a request head without its final CRLF CRLF:
// the method, the target's host (absolute-form) and path (without the
// query), the Host header, and the body framing.
func parseRequestHead(head []byte) (*HTTPRequest, bodyFraming, error) {
	var f bodyFraming
	lines := strings.Split(string(head), "\r\n")
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") || parts[0] == "" || parts[1] == "" {
		return nil, f, errNotHTTP
	}
	for _, c := range parts[0] {
		if c < 'A' || c > 'Z' {
			return nil, f, errNotHTTP
		}
	}
	r := &HTTPRequest{Method: parts[0]}
	target := parts[1]
	if i := strings.Index(target, "://"); i > 0 && !strings.HasPrefix(target, "/") {
		rest := target[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			r.Host, target = rest, "/"
		} else {
			r.Host, target = rest[:j], rest[j:]
		}
	}
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	r.Path = target
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return nil, f, fmt.Errorf("header line without a colon: %q", l)
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "host":
			if r.Host == "" {
				r.Host = value
			}
		case "content-length":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return nil, f, fmt.Errorf("bad Content-Length %q", value)
			}
			f.length = n
		case "transfer-encoding":
			codings := strings.Split(value, ",")
			f.chunked = strings.EqualFold(strings.TrimSpace(codings[len(codings)-1]), "chunked")
		}
	}
	return r, f, nil
}
