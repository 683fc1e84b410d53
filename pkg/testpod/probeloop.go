package testpod

import (
	"context"
	"fmt"
	"time"
)

// LoopConfig repeats a probe: one every Every (or right after the previous
// one when it took longer) until For has passed.
type LoopConfig struct {
	ConnectConfig
	Every time.Duration
	For   time.Duration
}

// LoopSummary counts the verdicts of a probe loop. LongestGap is the longest
// time between two connected probes with only failures in between (or from
// the start, or until the end): how long the path was broken.
type LoopSummary struct {
	Attempts   int
	Connected  int
	Refused    int
	Timeout    int
	LongestGap time.Duration
}

// String is the line `connect --every` prints.
func (s LoopSummary) String() string {
	return fmt.Sprintf("attempts=%d connected=%d refused=%d timeout=%d longest-gap-ms=%d",
		s.Attempts, s.Connected, s.Refused, s.Timeout, s.LongestGap.Milliseconds())
}

// ConnectLoop runs cfg's probe repeatedly and counts the verdicts; the loop
// is bounded by cfg.For (and ctx).
func ConnectLoop(ctx context.Context, cfg LoopConfig) (LoopSummary, error) {
	var sum LoopSummary
	if cfg.Every <= 0 || cfg.For <= 0 {
		return sum, fmt.Errorf("testpod: connect %s: --every and --for must be positive", cfg.To)
	}
	start := time.Now()
	end := start.Add(cfg.For)
	lastOK := start
	failing := false
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		res, err := Connect(ctx, cfg.ConnectConfig)
		if err != nil {
			return sum, err
		}
		sum.Attempts++
		switch res.Verdict {
		case Connected:
			sum.Connected++
			if failing {
				sum.LongestGap = max(sum.LongestGap, time.Since(lastOK))
			}
			failing, lastOK = false, time.Now()
		case Refused:
			sum.Refused++
			failing = true
		default:
			sum.Timeout++
			failing = true
		}
		if wait := cfg.Every - time.Since(now); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	if failing {
		sum.LongestGap = max(sum.LongestGap, time.Since(lastOK))
	}
	return sum, nil
}
