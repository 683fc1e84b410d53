package openflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Bundle control types (OpenFlow 1.5.1 section 7.3.9, ofp_bundle_ctrl_type).
const (
	bundleOpenRequest    uint16 = 0
	bundleOpenReply      uint16 = 1
	bundleCloseRequest   uint16 = 2
	bundleCloseReply     uint16 = 3
	bundleCommitRequest  uint16 = 4
	bundleCommitReply    uint16 = 5
	bundleDiscardRequest uint16 = 6
	bundleDiscardReply   uint16 = 7
)

// Bundle flags: every bundle of this package is atomic and ordered.
const (
	BundleAtomic  uint16 = 1 // OFPBF_ATOMIC
	BundleOrdered uint16 = 2 // OFPBF_ORDERED
)

// OpenFlow 1.3 carries bundles in ONF experimenter messages (ONF extension
// 230, "bundles"), with the 1.4 bodies.
const (
	onfBundleControl    uint32 = 2300
	onfBundleAddMessage uint32 = 2301
)

var bundleCtrlNames = map[uint16]string{
	bundleOpenRequest: "open", bundleCloseRequest: "close", bundleCommitRequest: "commit", bundleDiscardRequest: "discard",
}

// bundleControl is OFPT_BUNDLE_CONTROL (or its ONF form in 1.3).
type bundleControl struct {
	id    uint32
	typ   uint16
	flags uint16
}

func (m *bundleControl) MsgType() uint8 { return TypeBundleControl }

func (m *bundleControl) AppendBody(b []byte, _ uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, m.id)
	b = binary.BigEndian.AppendUint16(b, m.typ)
	return binary.BigEndian.AppendUint16(b, m.flags), nil
}

func (m *bundleControl) String() string {
	return fmt.Sprintf("bundle %d %s", m.id, bundleCtrlNames[m.typ])
}

// appendBundleControl encodes a bundle control message for the negotiated version.
func (c *Conn) appendBundleControl(b []byte, m *bundleControl, xid uint32) ([]byte, error) {
	if c.version >= Version15 {
		return c.appendAt(b, m, xid)
	}
	body := appendExperimenter(make([]byte, 0, 16), ONFExperimenter, onfBundleControl)
	body, _ = m.AppendBody(body, c.version)
	return c.appendAt(b, &RawMessage{Type: TypeExperimenter, Body: body}, xid)
}

// appendBundleAdd encodes OFPT_BUNDLE_ADD_MESSAGE holding m. The inner
// message carries the same xid as the outer one, as the switch requires
// (OFPBFC_MSG_BAD_XID otherwise), so an error names the inner message.
func (c *Conn) appendBundleAdd(b []byte, id uint32, flags uint16, m Message, xid uint32) ([]byte, error) {
	start := len(b)
	if c.version >= Version15 {
		b = append(b, c.version, TypeBundleAddMessage, 0, 0)
	} else {
		b = append(b, c.version, TypeExperimenter, 0, 0)
	}
	b = binary.BigEndian.AppendUint32(b, xid)
	if c.version < Version15 {
		b = appendExperimenter(b, ONFExperimenter, onfBundleAddMessage)
	}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, flags)
	b, err := AppendMessage(b, m, c.version, xid)
	if err != nil {
		return b[:start], fmt.Errorf("openflow: encode %s for bundle %d: %w", describe(m), id, err)
	}
	n := len(b) - start
	if n > 0xffff {
		return b[:start], fmt.Errorf("openflow: %s does not fit in a bundle add message: %w", describe(m), errTooLong(n))
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(n))
	return b, nil
}

// BundleError is returned when a bundle was not committed: nothing of it is
// applied. Failed holds the errors of the messages the switch rejected (each
// naming its message); Err is the control error when no message is to blame.
type BundleError struct {
	ID       uint32
	Messages int
	Failed   []*Error
	Err      error
}

// Error implements error.
func (e *BundleError) Error() string {
	switch {
	case len(e.Failed) == 1:
		return fmt.Sprintf("openflow: bundle %d of %d messages not applied: %v", e.ID, e.Messages, e.Failed[0])
	case len(e.Failed) > 1:
		return fmt.Sprintf("openflow: bundle %d of %d messages not applied: %v (and %d more failed messages)", e.ID, e.Messages, e.Failed[0], len(e.Failed)-1)
	}
	return fmt.Sprintf("openflow: bundle %d of %d messages not applied: %v", e.ID, e.Messages, e.Err)
}

// Unwrap exposes the failed messages' errors and the control error.
func (e *BundleError) Unwrap() []error {
	var out []error
	for _, f := range e.Failed {
		out = append(out, f)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Bundle applies messages (flow, group, meter mods, packet-outs) atomically
// and in order: all of them or, on any error, none. It writes the open
// request, every message and the close request in as few writes as the
// buffer allows, waits for the close reply (by then the switch has reported
// every message it could not decode), then commits, or discards when a
// message failed. A failed commit returns the error of the message that
// failed; the switch rolls a failed commit back itself. Every *BundleError
// means nothing was applied; any other error after the commit was sent
// (context ended, connection lost) means the outcome is unknown.
func (c *Conn) Bundle(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	id := c.nextBundle.Add(1)
	flags := BundleAtomic | BundleOrdered
	n := len(msgs)
	// xids: open, the messages, close, commit.
	first := c.allocXids(n + 3)
	// The control messages name themselves in errors (String), so the hot
	// path formats nothing.
	openMsg := &bundleControl{id: id, typ: bundleOpenRequest, flags: flags}
	closeMsg := &bundleControl{id: id, typ: bundleCloseRequest, flags: flags}
	open := newCall(first, openMsg, "")
	bt := &batch{first: first + 1, msgs: msgs}
	closeCall := newCall(first+uint32(n)+1, closeMsg, "")
	if err := c.watch(bt, open, closeCall); err != nil {
		return err
	}
	defer c.unwatch(bt)
	err := c.writeBatch(ctx, n+2, func(b []byte, i int) ([]byte, error) {
		switch i {
		case 0:
			return c.appendBundleControl(b, openMsg, open.xid)
		case n + 1:
			return c.appendBundleControl(b, closeMsg, closeCall.xid)
		}
		return c.appendBundleAdd(b, id, flags, msgs[i-1], bt.first+uint32(i-1))
	})
	if err != nil {
		c.unregister(open.xid)
		c.unregister(closeCall.xid)
		// An encoding error stops the batch before its close: drop the
		// half-sent bundle so the switch does not keep it.
		if c.Err() == nil {
			c.discard(ctx, id, flags)
		}
		return &BundleError{ID: id, Messages: n, Err: err}
	}
	_, openErr := c.wait(ctx, open)
	_, closeErr := c.wait(ctx, closeCall)
	if openErr != nil || closeErr != nil {
		if c.Err() == nil {
			c.discard(ctx, id, flags)
		}
		return &BundleError{ID: id, Messages: n, Failed: c.batchErrors(bt), Err: errors.Join(openErr, closeErr)}
	}
	if failed := c.batchErrors(bt); len(failed) > 0 {
		c.discard(ctx, id, flags)
		return &BundleError{ID: id, Messages: n, Failed: failed}
	}
	commitMsg := &bundleControl{id: id, typ: bundleCommitRequest, flags: flags}
	commit := newCall(first+uint32(n)+2, commitMsg, "")
	if err := c.register(commit); err != nil {
		return err
	}
	err = c.writeBatch(ctx, 1, func(b []byte, _ int) ([]byte, error) {
		return c.appendBundleControl(b, commitMsg, commit.xid)
	})
	if err != nil {
		c.unregister(commit.xid)
		return &BundleError{ID: id, Messages: n, Err: err}
	}
	if _, err := c.wait(ctx, commit); err != nil {
		var ofErr *Error
		if !errors.As(err, &ofErr) {
			// The commit went out but its answer was not seen (the caller
			// gave up, or the connection died): the switch may have applied it.
			return fmt.Errorf("openflow: bundle %d of %d messages: commit sent, outcome unknown: %w", id, n, err)
		}
		// On OFPBFC_MSG_FAILED the switch has already sent the error of the
		// failed message (same connection, so it arrived first); that error
		// says everything the commit's does not.
		failed := c.batchErrors(bt)
		if len(failed) > 0 && isBundleMsgFailed(err) {
			err = nil
		}
		return &BundleError{ID: id, Messages: n, Failed: failed, Err: err}
	}
	return nil
}

// isBundleMsgFailed reports whether err is OFPBFC_MSG_FAILED, in its
// OpenFlow 1.5 or its ONF (1.3) form.
func isBundleMsgFailed(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return (e.Type == ErrTypeBundleFailed && e.Code == errCodeBundleMsgFailed) ||
		(e.Type == errTypeExperimenter && e.Experimenter == ONFExperimenter && e.Code == onfErrBundleMsgFailed)
}

// discard drops an open bundle. Failures are ignored: the caller is already
// returning an error and the switch forgets the bundle when the connection
// ends anyway. It runs even when the caller's context is done, briefly.
func (c *Conn) discard(ctx context.Context, id uint32, flags uint16) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	m := &bundleControl{id: id, typ: bundleDiscardRequest, flags: flags}
	cl := newCall(c.allocXids(1), m, m.String())
	if err := c.register(cl); err != nil {
		return
	}
	if err := c.writeBatch(ctx, 1, func(b []byte, _ int) ([]byte, error) { return c.appendBundleControl(b, m, cl.xid) }); err != nil {
		c.unregister(cl.xid)
		return
	}
	_, _ = c.wait(ctx, cl)
}
