package ipfix

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Writer encodes the messages of one exporting stream (one transport
// session and observation domain): it numbers them with the count of data
// records sent before each (RFC 7011 section 3.1). It is not safe for
// concurrent use.
type Writer struct {
	// Domain is the observation domain id of every message.
	Domain uint32
	// MaxLen bounds each message's length: a path MTU's worth for UDP
	// (section 10.3.3), up to MaxMessageLen for TCP. 0 means MaxMessageLen.
	MaxLen int

	seq uint32
	buf []byte
}

func (w *Writer) maxLen() int {
	if w.MaxLen <= 0 || w.MaxLen > MaxMessageLen {
		return MaxMessageLen
	}
	return w.MaxLen
}

// Sequence returns the count of data records encoded so far (mod 2^32).
func (w *Writer) Sequence() uint32 { return w.seq }

// Reset restarts the numbering, for a new transport session.
func (w *Writer) Reset() { w.seq = 0 }

func (w *Writer) header(exportTime uint32) {
	w.buf = binary.BigEndian.AppendUint16(w.buf[:0], Version)
	w.buf = append(w.buf, 0, 0) // length, set at the end
	w.buf = binary.BigEndian.AppendUint32(w.buf, exportTime)
	w.buf = binary.BigEndian.AppendUint32(w.buf, w.seq)
	w.buf = binary.BigEndian.AppendUint32(w.buf, w.Domain)
}

func (w *Writer) finish() []byte {
	binary.BigEndian.PutUint16(w.buf[2:4], uint16(len(w.buf)))
	return w.buf
}

// Templates encodes one message holding ts in one template set and passes
// it to emit. The bytes are valid only during the call.
func (w *Writer) Templates(exportTime uint32, emit func([]byte) error, ts ...Template) error {
	w.header(exportTime)
	start := len(w.buf)
	w.buf = append(w.buf, 0, TemplateSetID, 0, 0)
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return err
		}
		w.buf = appendTemplateRecord(w.buf, t)
	}
	if len(w.buf) > w.maxLen() {
		return fmt.Errorf("templates take %d bytes, more than a message's %d", len(w.buf), w.maxLen())
	}
	binary.BigEndian.PutUint16(w.buf[start+2:], uint16(len(w.buf)-start))
	return emit(w.finish())
}

// Data encodes recs (each a value per field of t, in t's order) as data
// records of template t, in as many messages as MaxLen requires, each
// passed to emit (the bytes are valid only during the call). A record
// that cannot be encoded is an error and nothing after it is sent.
func (w *Writer) Data(exportTime uint32, t Template, recs [][]Value, emit func([]byte) error) error {
	max := w.maxLen()
	n := 0 // records in the message being built
	open := func() {
		w.header(exportTime)
		w.buf = binary.BigEndian.AppendUint16(w.buf, t.ID)
		w.buf = append(w.buf, 0, 0)
	}
	flush := func() error {
		binary.BigEndian.PutUint16(w.buf[HeaderLen+2:], uint16(len(w.buf)-HeaderLen))
		w.seq += uint32(n)
		n = 0
		return emit(w.finish())
	}
	open()
	for i, vals := range recs {
		if len(vals) != len(t.Fields) {
			return fmt.Errorf("record %d: %d values for template %d of %d fields", i, len(vals), t.ID, len(t.Fields))
		}
		mark := len(w.buf)
		var err error
		for j, e := range t.Fields {
			if w.buf, err = appendValue(w.buf, e, vals[j]); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
		}
		if len(w.buf) <= max {
			n++
			continue
		}
		if n == 0 {
			return fmt.Errorf("record %d: %d bytes do not fit in a message of %d", i, len(w.buf)-HeaderLen-SetHeaderLen, max)
		}
		rec := append([]byte(nil), w.buf[mark:]...)
		w.buf = w.buf[:mark]
		if err := flush(); err != nil {
			return err
		}
		open()
		w.buf = append(w.buf, rec...)
		if len(w.buf) > max {
			return fmt.Errorf("record %d: %d bytes do not fit in a message of %d", i, len(rec), max)
		}
		n = 1
	}
	if n == 0 {
		return nil
	}
	return flush()
}

// ReadMessage reads one message from a stream (TCP, section 10.4: the
// header's length frames it) into buf, which it grows as needed, and
// returns it.
func ReadMessage(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf) < HeaderLen {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:HeaderLen]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if v := binary.BigEndian.Uint16(buf); v != Version {
		return nil, fmt.Errorf("version %d, want %d", v, Version)
	}
	n := int(binary.BigEndian.Uint16(buf[2:]))
	if n < HeaderLen {
		return nil, fmt.Errorf("message length %d is shorter than its header", n)
	}
	if cap(buf) < n {
		nb := make([]byte, n)
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf[HeaderLen:]); err != nil {
		return nil, err
	}
	return buf, nil
}
