package diagram

import (
	"fmt"
	"sort"
	"strings"
)

// The service map: who talks to whom, from the Flow Aggregator's records.
// Clients in a column on the left, servers on the right, one arrow per
// (client, server, port), its label the port and the counts; a denied
// connection is a red dashed arrow whose label says "denied", so colour is
// never the only sign.

// MapEdge is one (client, server, port) pair of the map.
type MapEdge struct {
	From, To string
	// Port is "TCP/80", or the Service "ns/name:port" it went through.
	Port        string
	Connections int
	Bytes       uint64
	Denied      bool
}

const (
	mapBoxH   = 30
	mapGap    = 14
	mapTop    = 48
	mapCharW  = 7.2
	mapMinBox = 140
	mapMiddle = 260
	// mapEdgeGap is the distance between the arrows leaving one client.
	mapEdgeGap = 18
)

// ServiceMapSVG draws the map; the order of edges does not matter.
func ServiceMapSVG(title string, edges []MapEdge) string {
	edges = append([]MapEdge(nil), edges...)
	sort.Slice(edges, func(i, j int) bool {
		a, b := edges[i], edges[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return !a.Denied && b.Denied
	})
	column := func(name func(MapEdge) string) ([]string, map[string]int) {
		idx := map[string]int{}
		var out []string
		for _, e := range edges {
			n := name(e)
			if _, ok := idx[n]; !ok {
				idx[n] = len(out)
				out = append(out, n)
			}
		}
		sort.Strings(out)
		for i, n := range out {
			idx[n] = i
		}
		return out, idx
	}
	clients, ci := column(func(e MapEdge) string { return e.From })
	servers, si := column(func(e MapEdge) string { return e.To })
	boxW := func(names []string) int {
		w := mapMinBox
		for _, n := range names {
			w = max(w, 20+int(float64(len(n))*mapCharW))
		}
		return w
	}
	lw, rw := boxW(clients), boxW(servers)
	labelW := 0
	for _, e := range edges {
		labelW = max(labelW, int(float64(len(edgeLabel(e)))*6.6))
	}
	middle := max(mapMiddle, labelW+24+160)
	width := 20 + lw + middle + rw + 20
	// A client's box grows with its arrows, which leave it mapEdgeGap
	// apart, each label just above its arrow's level start, so labels
	// never share a line.
	out := map[string]int{}
	for _, e := range edges {
		out[e.From]++
	}
	clientY, clientH := make([]int, len(clients)), make([]int, len(clients))
	y := mapTop
	for i, n := range clients {
		clientY[i], clientH[i] = y, max(mapBoxH, out[n]*mapEdgeGap+8)
		y += clientH[i] + mapGap
	}
	height := y
	serverY := func(i int) int { return mapTop + i*(mapBoxH+mapGap) }
	height = max(height, serverY(len(servers))) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		width, height, width, height)
	b.WriteString(`<defs><marker id="map-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker>` +
		`<marker id="map-arrow-denied" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="#b3261e"/></marker></defs>` + "\n")
	fmt.Fprintf(&b, `<text class="title" x="%d" y="22" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n", width/2, svgText(title))
	left, right := 20, width-20-rw
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#3b4d66">clients</text><text x="%d" y="40" fill="#3b4d66">servers</text>`+"\n", left, right)
	for i, n := range clients {
		fmt.Fprintf(&b, `<g class="workload client" data-name="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="#e8f0fb" stroke="#555"/><text x="%d" y="%d">%s</text></g>`+"\n",
			svgText(n), left, clientY[i], lw, clientH[i], left+10, clientY[i]+clientH[i]/2+5, svgText(n))
	}
	for i, n := range servers {
		fmt.Fprintf(&b, `<g class="workload server" data-name="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="#eef7ee" stroke="#555"/><text x="%d" y="%d">%s</text></g>`+"\n",
			svgText(n), right, serverY(i), rw, mapBoxH, right+10, serverY(i)+19, svgText(n))
	}
	nth := map[string]int{}
	for _, e := range edges {
		a, z := ci[e.From], si[e.To]
		k := nth[e.From]
		nth[e.From] = k + 1
		y1 := clientY[a] + mapEdgeGap*(k+1) - 2
		y2 := serverY(z) + mapBoxH/2
		class, stroke, dash, marker, fill := "edge allowed", "#444", "", "map-arrow", "#3b4d66"
		if e.Denied {
			class, stroke, dash, marker, fill = "edge denied", "#b3261e", ` stroke-dasharray="6,4"`, "map-arrow-denied", "#b3261e"
		}
		// Each arrow runs level in its own lane past the labels (its label
		// sits just above it), then turns towards its server: no arrow
		// crosses another one's label.
		x1, xm, x2 := left+lw, left+lw+labelW+24, right
		fmt.Fprintf(&b, `<g class="%s" data-from="%s" data-to="%s"><polyline points="%d,%d %d,%d %d,%d" fill="none" stroke="%s" stroke-width="1.6"%s marker-end="url(#%s)"/>`,
			class, svgText(e.From), svgText(e.To), x1, y1, xm, y1, x2, y2, stroke, dash, marker)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="%s">%s</text></g>`+"\n", x1+8, y1-4, fill, svgText(edgeLabel(e)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// edgeLabel is an arrow's text: the port, the counts, "denied".
func edgeLabel(e MapEdge) string {
	l := fmt.Sprintf("%s · %d conn", e.Port, e.Connections)
	if e.Bytes > 0 {
		l += " · " + humanBytes(e.Bytes)
	}
	if e.Denied {
		l = "✖ denied " + l
	}
	return l
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
