package l7engine

import "testing"

func TestGlobsMatchAsUpstreamDocumentsThem(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/api/v2/*", "/api/v2/users", true},
		{"/api/v2/*", "/api/v2/", true},
		{"/api/v2/*", "/api/v2", false},
		{"/api/v2/*", "/api/v1/users", false},
		{"*/v2/*", "/api/v2/x", true},
		{"*/v2/*", "/v2/", true},
		{"*/v2/*", "/api/v3/x", false},
		{"/index.html", "/index.html", true},
		{"/index.html", "/index.htm", false},
		{"/index.html", "/index.html/", false},
		{"*.foo.com", "a.foo.com", true},
		{"*.foo.com", "a.b.foo.com", true},
		{"*.foo.com", "foo.com", false},
		{"*.foo.*", "x.foo.org", true},
		{"*.foo.*", "x.bar.org", false},
		{"foo.bar.com", "foo.bar.com", true},
		{"foo.bar.com", "foo.bar.co", false},
		{"*", "", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"**", "anything", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestRulesAllowWhatOneEntryMatches(t *testing.T) {
	r := &Rule{HTTP: []HTTPMatch{{Path: "/api/v2/*", Host: "foo.bar.com", Method: "GET"}, {Path: "/public/*"}}}
	for _, tc := range []struct {
		req  HTTPRequest
		want bool
	}{
		{HTTPRequest{"GET", "foo.bar.com", "/api/v2/x"}, true},
		{HTTPRequest{"GET", "FOO.bar.com:8080", "/api/v2/x"}, true},
		{HTTPRequest{"POST", "foo.bar.com", "/api/v2/x"}, false},
		{HTTPRequest{"GET", "other.com", "/api/v2/x"}, false},
		{HTTPRequest{"DELETE", "any", "/public/a"}, true},
		{HTTPRequest{"GET", "foo.bar.com", "/admin"}, false},
	} {
		if got := r.AllowsHTTP(tc.req); got != tc.want {
			t.Errorf("AllowsHTTP(%+v) = %v, want %v", tc.req, got, tc.want)
		}
	}
	any := &Rule{HTTP: []HTTPMatch{{}}}
	if !any.AllowsHTTP(HTTPRequest{"PATCH", "", "/x"}) {
		t.Error("an empty http entry must allow every request")
	}
	tls := &Rule{TLS: []TLSMatch{{SNI: "*.bar.com"}}}
	for sni, want := range map[string]bool{"www.bar.com": true, "WWW.BAR.COM": true, "bar.com": false, "www.foo.com": false, "": false} {
		if got := tls.AllowsSNI(sni); got != want {
			t.Errorf("AllowsSNI(%q) = %v, want %v", sni, got, want)
		}
	}
	if !(&Rule{TLS: []TLSMatch{{}}}).AllowsSNI("") {
		t.Error("an empty tls entry must allow a handshake without server name")
	}
}
