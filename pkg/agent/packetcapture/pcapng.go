package packetcapture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// pcapng is the file format the captures are written in (the PCAP Next
// Generation format, draft-ietf-opsawg-pcapng): a Section Header Block,
// one Interface Description Block (Ethernet, nanosecond timestamps), then
// one Enhanced Packet Block per packet. Blocks are little-endian (the byte
// order magic tells readers so) and padded to 32 bits.

// Block types and option codes (draft-ietf-opsawg-pcapng, sections 4 and 3.5).
const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 0x00000001
	blockEPB = 0x00000006

	byteOrderMagic = 0x1A2B3C4D

	optEndOfOpt   = 0
	optSHBUserApp = 4
	optIfName     = 2
	optIfTSResol  = 9

	// linkTypeEthernet is LINKTYPE_ETHERNET (tcpdump.org link-layer types).
	linkTypeEthernet = 1
	// tsResolNanos: if_tsresol 9, timestamps count 10^-9 s.
	tsResolNanos = 9
)

// SnapLen is the largest packet part a capture keeps.
const SnapLen = 65535

var le = binary.LittleEndian

// pcapngWriter writes one section with one Ethernet interface.
type pcapngWriter struct {
	w *bufio.Writer
}

// newPcapngWriter writes the section and interface headers to w; ifName
// names the interface the packets were taken on.
func newPcapngWriter(w io.Writer, ifName string) (*pcapngWriter, error) {
	p := &pcapngWriter{w: bufio.NewWriter(w)}
	// SHB: magic, version 1.0, section length unknown (-1), options.
	shb := le.AppendUint32(nil, byteOrderMagic)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0))
	shb = appendOption(shb, optSHBUserApp, []byte("antrea-agent"))
	shb = appendOption(shb, optEndOfOpt, nil)
	if err := p.block(blockSHB, shb); err != nil {
		return nil, err
	}
	// IDB: link type, reserved, snap length, options.
	idb := le.AppendUint16(nil, linkTypeEthernet)
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, SnapLen)
	if ifName != "" {
		idb = appendOption(idb, optIfName, []byte(ifName))
	}
	idb = appendOption(idb, optIfTSResol, []byte{tsResolNanos})
	idb = appendOption(idb, optEndOfOpt, nil)
	if err := p.block(blockIDB, idb); err != nil {
		return nil, err
	}
	return p, nil
}

// WritePacket writes one Enhanced Packet Block: data is what was captured
// of a packet of origLen bytes, at ts.
func (p *pcapngWriter) WritePacket(ts time.Time, data []byte, origLen int) error {
	if len(data) > SnapLen {
		data = data[:SnapLen]
	}
	if origLen < len(data) {
		origLen = len(data)
	}
	ns := uint64(ts.UnixNano())
	epb := le.AppendUint32(nil, 0) // interface 0
	epb = le.AppendUint32(epb, uint32(ns>>32))
	epb = le.AppendUint32(epb, uint32(ns))
	epb = le.AppendUint32(epb, uint32(len(data)))
	epb = le.AppendUint32(epb, uint32(origLen))
	epb = append(epb, data...)
	epb = pad32(epb)
	return p.block(blockEPB, epb)
}

// Flush writes what is buffered.
func (p *pcapngWriter) Flush() error { return p.w.Flush() }

// block writes a block: type, total length, body, total length again.
func (p *pcapngWriter) block(typ uint32, body []byte) error {
	total := uint32(12 + len(body))
	b := le.AppendUint32(make([]byte, 0, total), typ)
	b = le.AppendUint32(b, total)
	b = append(b, body...)
	b = le.AppendUint32(b, total)
	if _, err := p.w.Write(b); err != nil {
		return fmt.Errorf("write pcapng block 0x%x: %w", typ, err)
	}
	return nil
}

// appendOption appends an option (code, length, value padded to 32 bits).
func appendOption(b []byte, code uint16, value []byte) []byte {
	b = le.AppendUint16(b, code)
	b = le.AppendUint16(b, uint16(len(value)))
	b = append(b, value...)
	return pad32(b)
}

func pad32(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
