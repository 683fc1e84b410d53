package l7engine

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// requests reads every request head of a client stream fed in pieces of
// size chunk, as the engine does.
func requests(t *testing.T, stream string, chunk int) ([]HTTPRequest, error) {
	t.Helper()
	var h httpParser
	var out []HTTPRequest
	var buf []byte
	for i := 0; i < len(stream); i += chunk {
		end := min(i+chunk, len(stream))
		buf = append(buf, stream[i:end]...)
		for {
			n, req, err := h.step(buf)
			if err != nil {
				return out, err
			}
			if n == 0 {
				break
			}
			if req != nil {
				out = append(out, *req)
			}
			buf = buf[n:]
		}
	}
	if len(buf) > 0 {
		return out, errors.New("bytes left undecided: " + string(buf))
	}
	return out, nil
}

func TestHTTPParserReadsEveryRequestOfAKeepAliveStream(t *testing.T) {
	// The stream is written by net/http's own client code (Request.Write),
	// not by hand: a GET, a POST with a Content-Length body, a chunked
	// PUT, and an absolute-form request.
	var sb strings.Builder
	get := httptest.NewRequest("GET", "http://foo.bar.com/api/v2/users?x=1", nil)
	post := httptest.NewRequest("POST", "http://foo.bar.com/form", strings.NewReader("a=1&b=2"))
	put := httptest.NewRequest("PUT", "http://up.example/chunks", strings.NewReader(strings.Repeat("z", 3000)))
	put.ContentLength = -1 // unknown: net/http sends it chunked
	for _, r := range []*http.Request{get, post, put} {
		if err := r.Write(&sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := httptest.NewRequest("DELETE", "http://x.example/p", nil).WriteProxy(&sb); err != nil {
		t.Fatal(err)
	}
	want := []HTTPRequest{{"GET", "foo.bar.com", "/api/v2/users"}, {"POST", "foo.bar.com", "/form"},
		{"PUT", "up.example", "/chunks"}, {"DELETE", "x.example", "/p"}}
	for _, chunk := range []int{1, 7, 100, 1 << 20} {
		got, err := requests(t, sb.String(), chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got) != len(want) {
			t.Fatalf("chunk %d: got %d requests %+v, want %+v", chunk, len(got), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("chunk %d: request %d = %+v, want %+v", chunk, i, got[i], want[i])
			}
		}
	}
	if !strings.Contains(sb.String(), "Transfer-Encoding: chunked") {
		t.Fatal("the PUT was not sent chunked: the test does not cover chunked bodies")
	}
}

func TestHTTPParserRefusesWhatIsNotHTTP(t *testing.T) {
	for name, stream := range map[string]string{
		"a TLS record":             "\x16\x03\x01\x00\x05hello",
		"a lower-case method":      "get / HTTP/1.1\r\n\r\n",
		"HTTP/2 preface":           "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"a request line too short": "GET /\r\n\r\n",
		"a bad Content-Length":     "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"a header without colon":   "GET / HTTP/1.1\r\nHost foo\r\n\r\n",
	} {
		if _, err := requests(t, stream, 1<<20); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
