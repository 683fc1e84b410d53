package testpod

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTheHTTPClientSeesWhatTheServerAnswersOverHTTPAndHTTPS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain, secure := freePort(t, "tcp"), freePort(t, "tcp")
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{Name: "web", Host: "127.0.0.1", HTTPPorts: []int{plain}, HTTPSPorts: []int{secure}, Ready: ready})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port int
		tls  bool
	}{{plain, false}, {secure, true}} {
		res, err := HTTP(ctx, HTTPConfig{To: "127.0.0.1:" + strconv.Itoa(tc.port), Host: "foo.bar.com", TLS: tc.tls,
			Requests: []string{"GET /api/v2/x", "DELETE /admin other.example", "GET /hostname"}, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"GET /api/v2/x: 200 web GET /api/v2/x", "DELETE /admin other.example: 200 web DELETE /admin", "GET /hostname: 200 web"}
		for i, r := range res {
			if r.String() != want[i] {
				t.Errorf("tls %v: %q, want %q", tc.tls, r.String(), want[i])
			}
		}
		if s := HTTPSummary(res, time.Second); !strings.HasPrefix(s, "requests 3 ok 3 ") {
			t.Errorf("summary %q", s)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
