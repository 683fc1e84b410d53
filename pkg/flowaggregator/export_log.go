package flowaggregator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// JSONLog writes each record as one JSON object per line to Path, rotating
// it when it passes MaxBytes: Path.1 is the newest rotated file, up to
// Path.MaxBackups; older ones are removed. So the log never takes more than
// (MaxBackups+1) × MaxBytes, give or take a batch.
type JSONLog struct {
	Path       string
	MaxBytes   int64
	MaxBackups int
	Metrics    *Metrics
	queue      chan []Flow

	f    *os.File
	w    *bufio.Writer
	size int64
}

// Export queues fs (never blocks).
func (l *JSONLog) Export(fs []Flow) {
	select {
	case l.queue <- fs:
	default:
		l.Metrics.RecordsDropped.WithLabelValues("log").Add(float64(len(fs)))
	}
}

// Run writes until ctx ends.
func (l *JSONLog) Run(ctx context.Context) {
	defer l.close()
	for {
		select {
		case <-ctx.Done():
			return
		case fs := <-l.queue:
			if err := l.write(fs); err != nil {
				l.Metrics.ExportErrors.WithLabelValues("log").Inc()
				l.Metrics.RecordsDropped.WithLabelValues("log").Add(float64(len(fs)))
				klog.ErrorS(err, "Writing the flow log failed", "path", l.Path)
				l.close()
				continue
			}
			l.Metrics.RecordsExported.WithLabelValues("log").Add(float64(len(fs)))
		}
	}
}

func (l *JSONLog) open() error {
	f, err := os.OpenFile(l.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.w, l.size = f, bufio.NewWriter(f), st.Size()
	return nil
}

func (l *JSONLog) close() {
	if l.f != nil {
		_ = l.w.Flush()
		_ = l.f.Close()
		l.f = nil
	}
}

func (l *JSONLog) write(fs []Flow) error {
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
	}
	for i := range fs {
		b, err := json.Marshal(&fs[i])
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if l.size > 0 && l.size+int64(len(b)) > l.MaxBytes {
			if err := l.rotate(); err != nil {
				return err
			}
		}
		n, err := l.w.Write(b)
		l.size += int64(n)
		if err != nil {
			return err
		}
	}
	return l.w.Flush()
}

// rotate shifts Path.i to Path.i+1 (dropping the last), Path to Path.1,
// and starts an empty Path.
func (l *JSONLog) rotate() error {
	l.close()
	if l.MaxBackups == 0 {
		if err := os.Remove(l.Path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return l.open()
	}
	_ = os.Remove(fmt.Sprintf("%s.%d", l.Path, l.MaxBackups))
	for i := l.MaxBackups - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", l.Path, i), fmt.Sprintf("%s.%d", l.Path, i+1))
	}
	if err := os.Rename(l.Path, l.Path+".1"); err != nil && !os.IsNotExist(err) {
		return err
	}
	return l.open()
}
