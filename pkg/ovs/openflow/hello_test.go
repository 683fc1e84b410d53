package openflow

import "testing"

func TestVersionNegotiation(t *testing.T) {
	bitmapHello := func(vs ...uint8) []byte { b, _ := (&Hello{Versions: vs}).AppendBody(nil, 0); return b }
	tests := []struct {
		name    string
		ours    []uint8
		peer    Header
		body    []byte
		want    uint8
		wantErr bool
	}{
		{"the highest common version of two bitmaps wins", []uint8{Version15, Version13}, Header{Version: 6}, bitmapHello(1, 4, 6), Version15, false},
		{"a peer without 1.5 gets 1.3", []uint8{Version15, Version13}, Header{Version: 4}, bitmapHello(1, 4), Version13, false},
		{"no common bit fails", []uint8{Version15}, Header{Version: 4}, bitmapHello(1, 4), 0, true},
		{"a peer without bitmap gets the lower header version", []uint8{Version15, Version13}, Header{Version: 4}, nil, Version13, false},
		{"a peer without bitmap and an unknown version fails", []uint8{Version15, Version13}, Header{Version: 5}, nil, 0, true},
		{"an old peer fails", []uint8{Version15, Version13}, Header{Version: 1}, nil, 0, true},
		{"an element after an unknown element is found", []uint8{Version13}, Header{Version: 4}, append([]byte{0, 9, 0, 5, 1, 0, 0, 0}, bitmapHello(4)...), Version13, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NegotiateVersion(tc.ours, tc.peer, tc.body)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %#x, %v; want %#x, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
