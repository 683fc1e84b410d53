package openflow

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// PacketInKind is the first byte of a packet-in's userdata: which feature's
// flow sent the packet to the agent, and so which handler reads it. Every
// kind is declared here, once; the rest of the userdata is the feature's
// (policy_packetin.go, traceflow.go).
type PacketInKind byte

// Packet-in kinds.
const (
	// PacketInServiceReject: a Service port without endpoints (EndpointDNAT's
	// reject flow); the agent answers with a TCP reset or an ICMP port
	// unreachable (pkg/agent/proxy).
	PacketInServiceReject PacketInKind = 1
	// PacketInPolicy: a policy rule that rejects or logs (pkg/agent/controller/networkpolicy).
	PacketInPolicy PacketInKind = 2
	// PacketInTraceflow: a traced packet at a point of the pipeline (pkg/agent/traceflow).
	PacketInTraceflow PacketInKind = 3
	// PacketInCapture: a packet a PacketCapture takes (pkg/agent/packetcapture).
	PacketInCapture PacketInKind = 4
	// PacketInDNS: a DNS answer to a pod a toFQDN rule applies to, paused
	// until the rule's flows hold the addresses it names
	// (pkg/agent/controller/networkpolicy, fqdn.go here).
	PacketInDNS PacketInKind = 5
	// PacketInIGMP: an IGMP message a local pod sent (a report or a
	// leave; multicast.go here, pkg/agent/multicast reads it).
	PacketInIGMP PacketInKind = 6
)

var packetInKindNames = map[PacketInKind]string{
	PacketInServiceReject: "ServiceReject", PacketInPolicy: "Policy", PacketInTraceflow: "Traceflow",
	PacketInCapture: "PacketCapture", PacketInDNS: "DNS", PacketInIGMP: "IGMP",
}

func (k PacketInKind) String() string {
	if n, ok := packetInKindNames[k]; ok {
		return n
	}
	return "unknown"
}

// userData is the userdata of a controller action sending this kind, with
// the feature's own bytes after the kind.
func (k PacketInKind) userData(rest ...byte) []byte { return append([]byte{byte(k)}, rest...) }

// kindOf is the kind of a decoded packet-in (ok false without userdata).
func kindOf(pi *binding.PacketIn) (PacketInKind, bool) {
	if len(pi.UserData) == 0 {
		return 0, false
	}
	return PacketInKind(pi.UserData[0]), true
}

// PacketIO is the switch's packet-in and packet-out channel (a
// *binding.Client whose connections ask for async messages).
type PacketIO interface {
	PacketIns() <-chan binding.Frame
	SendPacketOut(ctx context.Context, po *binding.PacketOut) error
	// Apply sends messages and a barrier (a paused packet's NXT_RESUME).
	Apply(ctx context.Context, msgs ...binding.Message) error
}

// PacketInHandler handles one decoded packet-in of the kind it registered for.
type PacketInHandler func(ctx context.Context, pi *binding.PacketIn)

// PacketInRouter is what a consumer of packet-ins holds: it registers the
// handler of its kind and sends its packet-outs to the switch.
type PacketInRouter interface {
	Handle(kind PacketInKind, h PacketInHandler)
	SendPacketOut(ctx context.Context, po *binding.PacketOut) error
	// Resume lets a packet a controller(pause) action sent go on through
	// the pipeline from where it stopped.
	Resume(ctx context.Context, pi *binding.PacketIn) error
}

// packetInQueue is the length of each kind's queue of packet-ins waiting
// for its handler.
const packetInQueue = 256

// PacketInDispatcher is the agent's one packet-in read loop: it decodes
// each packet-in once and hands it to the handler registered for its kind.
// Each kind has its own queue and goroutine, so a handler that falls behind
// loses its own packet-ins (counted), it never blocks the others. The
// packet-ins of a declared kind that arrive before its handler registers
// wait in its queue (its consumer starts after the dispatcher).
type PacketInDispatcher struct {
	src PacketIO

	mu     sync.Mutex
	queues map[PacketInKind]*kindQueue
	done   bool
}

// kindQueue is one kind's queue; handler is nil until its consumer
// registers.
type kindQueue struct {
	ch      chan queuedPacketIn
	handler PacketInHandler
}

type queuedPacketIn struct {
	ctx context.Context
	pi  *binding.PacketIn
}

var _ PacketInRouter = (*PacketInDispatcher)(nil)

// NewPacketInDispatcher reads src's packet-ins once Run starts.
func NewPacketInDispatcher(src PacketIO) *PacketInDispatcher {
	return &PacketInDispatcher{src: src, queues: map[PacketInKind]*kindQueue{}}
}

// Handle registers the handler of a kind, before or after Run started;
// packet-ins of the kind queued before are handled first. Each kind has one
// handler: a second Handle for the same kind replaces the first.
func (d *PacketInDispatcher) Handle(kind PacketInKind, h PacketInHandler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return
	}
	q := d.queueLocked(kind)
	started := q.handler != nil
	q.handler = h
	if !started {
		go d.work(q)
	}
}

// queueLocked is the queue of a kind, made on first use. d.mu is held.
func (d *PacketInDispatcher) queueLocked(kind PacketInKind) *kindQueue {
	q, ok := d.queues[kind]
	if !ok {
		q = &kindQueue{ch: make(chan queuedPacketIn, packetInQueue)}
		d.queues[kind] = q
	}
	return q
}

// work hands a kind's packet-ins to its current handler until the queue
// closes.
func (d *PacketInDispatcher) work(q *kindQueue) {
	for in := range q.ch {
		d.mu.Lock()
		h := q.handler
		d.mu.Unlock()
		h(in.ctx, in.pi)
	}
}

// Resume sends the switch the NXT_RESUME of a paused packet-in.
func (d *PacketInDispatcher) Resume(ctx context.Context, pi *binding.PacketIn) error {
	if len(pi.Continuation) == 0 {
		return fmt.Errorf("packet-in of table %d has no continuation: it was not paused", pi.TableID)
	}
	return d.src.Apply(ctx, pi.Resume())
}

// SendPacketOut sends a packet-out to the switch.
func (d *PacketInDispatcher) SendPacketOut(ctx context.Context, po *binding.PacketOut) error {
	return d.src.SendPacketOut(ctx, po)
}

// Run dispatches until ctx ends or the switch's channel closes; then every
// handler's goroutine ends once its queue is empty.
func (d *PacketInDispatcher) Run(ctx context.Context) {
	defer func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.done = true
		for k, q := range d.queues {
			close(q.ch)
			delete(d.queues, k)
		}
	}()
	ins := d.src.PacketIns()
	dropped := 0
	for {
		select {
		case <-ctx.Done():
			return
		case f, ok := <-ins:
			if !ok {
				return
			}
			pi, err := binding.DecodeAnyPacketIn(f)
			if err != nil {
				klog.V(2).InfoS("Undecodable packet-in", "err", err)
				continue
			}
			kind, ok := kindOf(pi)
			if !ok {
				continue
			}
			if !d.enqueue(kind, queuedPacketIn{ctx: ctx, pi: pi}) {
				if dropped++; dropped%100 == 1 {
					klog.InfoS("Packet-ins dropped: their handler is behind", "kind", kind, "dropped", dropped)
				}
			}
		}
	}
}

// enqueue hands a packet-in to its kind's queue; false when the queue is
// full. Packet-ins of undeclared kinds are dropped silently.
func (d *PacketInDispatcher) enqueue(kind PacketInKind, in queuedPacketIn) bool {
	if _, declared := packetInKindNames[kind]; !declared {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case d.queueLocked(kind).ch <- in:
		return true
	default:
		return false
	}
}
