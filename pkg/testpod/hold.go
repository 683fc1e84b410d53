package testpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// HoldConfig is a load of idle TCP connections: a client opening Count
// connections to To (at most Rate a second) and holding them open, or a
// server (Listen) accepting and holding every connection. Either holds until
// its context ends. It is the load of the FlowExporter's figures
// (docs/flow-export.md): many live connections that send nothing.
type HoldConfig struct {
	Listen string
	To     string
	Count  int
	Rate   int
	// Opened, if set, is called once the client has opened them all.
	Opened func(n int)
}

// Hold runs the client or the server until ctx ends; the client fails if a
// connection cannot be opened.
func Hold(ctx context.Context, cfg HoldConfig) error {
	switch {
	case cfg.Listen != "" && cfg.To == "":
		return holdServer(ctx, cfg.Listen)
	case cfg.To != "" && cfg.Listen == "":
		return holdClient(ctx, cfg)
	}
	return errors.New("testpod: hold wants --listen ADDR or --to HOST:PORT")
}

func holdServer(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		<-ctx.Done()
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE
			continue
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		// Read until the client closes: nothing is sent either way.
		go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
	}
}

func holdClient(ctx context.Context, cfg HoldConfig) error {
	if cfg.Count <= 0 {
		return fmt.Errorf("testpod: hold --to %s: --connections must be positive", cfg.To)
	}
	rate := cfg.Rate
	if rate <= 0 {
		rate = 500
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	conns := make([]net.Conn, 0, cfg.Count)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	d := net.Dialer{Timeout: 5 * time.Second}
	for len(conns) < cfg.Count {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		c, err := d.DialContext(ctx, "tcp", cfg.To)
		if err != nil {
			return fmt.Errorf("testpod: hold: connection %d to %s: %w", len(conns)+1, cfg.To, err)
		}
		conns = append(conns, c)
	}
	if cfg.Opened != nil {
		cfg.Opened(len(conns))
	}
	<-ctx.Done()
	return nil
}

// FloodConfig is a stream of TCP connection attempts: Rate a second to To,
// for For, each from a new source port and given up after Timeout. Against
// a destination a NetworkPolicy drops, each is a denied connection (the
// FlowExporter's bounded deny path: docs/flow-export.md).
type FloodConfig struct {
	To      string
	Rate    int
	For     time.Duration
	Timeout time.Duration
}

// FloodResult counts the attempts and how they ended.
type FloodResult struct{ Attempts, Connected, Failed int }

// Flood runs the attempts and waits for the last to end.
func Flood(ctx context.Context, cfg FloodConfig) (FloodResult, error) {
	var res FloodResult
	if cfg.Rate <= 0 || cfg.For <= 0 {
		return res, fmt.Errorf("testpod: flood %s: --rate and --for must be positive", cfg.To)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	tick := time.NewTicker(time.Second / time.Duration(cfg.Rate))
	defer tick.Stop()
	end := time.After(cfg.For)
	var mu sync.Mutex
	var wg sync.WaitGroup
	d := net.Dialer{Timeout: cfg.Timeout}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
		}
		res.Attempts++
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", cfg.To)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed++
				return
			}
			res.Connected++
			c.Close()
		}()
	}
	wg.Wait()
	return res, nil
}
