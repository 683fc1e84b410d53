package ipfix

import (
	"encoding/binary"
	"fmt"
)

// Message is a decoded message.
type Message struct {
	ExportTime uint32
	Sequence   uint32
	Domain     uint32
	// Templates are the template (and options template) records it held.
	Templates []Template
	// Records are its data records whose template was known.
	Records []Record
	// UnknownSets counts its data sets whose template was not known (yet):
	// RFC 7011 section 8 lets a collector drop them.
	UnknownSets int
}

// Record is a decoded data record.
type Record struct {
	TemplateID uint16
	Fields     []Element
	Values     []Value
}

// Get returns the value of the first field that is element e (same id
// and enterprise).
func (r Record) Get(e Element) (Value, bool) {
	for i, f := range r.Fields {
		if f.ID == e.ID && f.Enterprise == e.Enterprise {
			return r.Values[i], true
		}
	}
	return Value{}, false
}

// maxTemplates bounds what one session remembers, so a peer sending
// garbage cannot grow it without bound.
const maxTemplates = 4096

type templateKey struct {
	domain uint32
	id     uint16
}

// Session decodes the messages of one transport session (one TCP
// connection, or one UDP exporter address): it keeps the templates they
// announced, per observation domain. It never panics on malformed input;
// a malformed message is an error and leaves the templates it announced
// before the error in place. Not safe for concurrent use.
type Session struct {
	templates map[templateKey]Template
}

// NewSession returns a session that knows no template yet.
func NewSession() *Session {
	return &Session{templates: map[templateKey]Template{}}
}

// Decode decodes one message.
func (s *Session) Decode(b []byte) (*Message, error) {
	if len(b) < HeaderLen {
		return nil, fmt.Errorf("message of %d bytes is shorter than its header", len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != Version {
		return nil, fmt.Errorf("version %d, want %d", v, Version)
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if n < HeaderLen || n > len(b) {
		return nil, fmt.Errorf("message length %d for %d bytes", n, len(b))
	}
	m := &Message{
		ExportTime: binary.BigEndian.Uint32(b[4:]),
		Sequence:   binary.BigEndian.Uint32(b[8:]),
		Domain:     binary.BigEndian.Uint32(b[12:]),
	}
	rest := b[HeaderLen:n]
	for len(rest) > 0 {
		if len(rest) < SetHeaderLen {
			return m, fmt.Errorf("set header truncated")
		}
		id := binary.BigEndian.Uint16(rest)
		l := int(binary.BigEndian.Uint16(rest[2:]))
		if l < SetHeaderLen || l > len(rest) {
			return m, fmt.Errorf("set %d: length %d for %d bytes", id, l, len(rest))
		}
		body := rest[SetHeaderLen:l]
		rest = rest[l:]
		var err error
		switch {
		case id == TemplateSetID || id == OptionsTemplateSetID:
			err = s.templateSet(m, body, id == OptionsTemplateSetID)
		case id >= MinTemplateID:
			t, ok := s.templates[templateKey{m.Domain, id}]
			if !ok {
				m.UnknownSets++
				continue
			}
			err = dataSet(m, t, body)
		default:
			err = fmt.Errorf("set id %d is reserved", id)
		}
		if err != nil {
			return m, fmt.Errorf("set %d: %w", id, err)
		}
	}
	return m, nil
}

// templateSet decodes template records (sections 3.4.1 and 3.4.2); a
// record of no field withdraws its template (section 8.1).
func (s *Session) templateSet(m *Message, b []byte, options bool) error {
	hdr := 4
	if options {
		hdr = 6
	}
	for len(b) >= hdr {
		id := binary.BigEndian.Uint16(b)
		count := int(binary.BigEndian.Uint16(b[2:]))
		if id < MinTemplateID {
			if id == 0 && count == 0 {
				return nil // padding
			}
			return fmt.Errorf("template id %d below %d", id, MinTemplateID)
		}
		if count == 0 {
			delete(s.templates, templateKey{m.Domain, id})
			b = b[4:]
			continue
		}
		b = b[hdr:]
		t := Template{ID: id, Fields: make([]Element, 0, min(count, len(b)/4))}
		for range count {
			if len(b) < 4 {
				return fmt.Errorf("template %d: %w", id, errShort)
			}
			fid := binary.BigEndian.Uint16(b)
			flen := binary.BigEndian.Uint16(b[2:])
			b = b[4:]
			var ent uint32
			if fid&0x8000 != 0 {
				if len(b) < 4 {
					return fmt.Errorf("template %d: %w", id, errShort)
				}
				fid &^= 0x8000
				ent = binary.BigEndian.Uint32(b)
				b = b[4:]
			}
			e, ok := Lookup(ent, fid)
			if !ok {
				e = Element{ID: fid, Enterprise: ent, Type: OctetArray}
			}
			e.Length = flen
			t.Fields = append(t.Fields, e)
		}
		if minRecordLen(t) == 0 {
			return fmt.Errorf("template %d: its records take no bytes", id)
		}
		if _, ok := s.templates[templateKey{m.Domain, id}]; !ok && len(s.templates) >= maxTemplates {
			return fmt.Errorf("template %d: more than %d templates", id, maxTemplates)
		}
		s.templates[templateKey{m.Domain, id}] = t
		m.Templates = append(m.Templates, t)
	}
	return nil
}

// minRecordLen is the fewest bytes a record of t takes.
func minRecordLen(t Template) int {
	n := 0
	for _, e := range t.Fields {
		if e.Length == VariableLength {
			n++
		} else {
			n += int(e.Length)
		}
	}
	return n
}

// dataSet decodes the records of a data set; what is left shorter than a
// record is padding (section 3.3.1).
func dataSet(m *Message, t Template, b []byte) error {
	least := minRecordLen(t)
	for len(b) >= least {
		r := Record{TemplateID: t.ID, Fields: t.Fields, Values: make([]Value, len(t.Fields))}
		for i, e := range t.Fields {
			v, used, err := decodeValue(b, e)
			if err != nil {
				return fmt.Errorf("record %d field %s: %w", len(m.Records), e, err)
			}
			r.Values[i] = v
			b = b[used:]
		}
		m.Records = append(m.Records, r)
	}
	return nil
}
