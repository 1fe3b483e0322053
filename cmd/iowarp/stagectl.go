package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

// stageArgs are the arguments of the control socket's stage-in,
// stage-out and evict streams.
type stageArgs struct {
	Paths   []string `json:"paths"` // mount-relative; none: the whole mount
	Drop    bool     `json:"drop,omitempty"`
	Workers int      `json:"workers,omitempty"` // stage-in: 0 = the flushers' count
}

// stageStreams are the daemon's long control operations on fsys.
func stageStreams(fsys *files.FS) map[string]control.StreamHandler {
	type op func(ctx context.Context, a stageArgs, progress func(files.StageReport)) (files.StageReport, error)
	wrap := func(name string, run op) control.StreamHandler {
		return func(ctx context.Context, raw json.RawMessage, progress func(any)) (any, error) {
			var a stageArgs
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, fmt.Errorf("%s: bad arguments: %w", name, err)
				}
			}
			start := time.Now()
			rep, err := run(ctx, a, func(r files.StageReport) { progress(r) })
			logStage(name, a, rep, err, time.Since(start))
			return rep, err
		}
	}
	return map[string]control.StreamHandler{
		"stage-in": wrap("stage-in", func(ctx context.Context, a stageArgs, p func(files.StageReport)) (files.StageReport, error) {
			return fsys.StageIn(ctx, a.Paths, a.Workers, p)
		}),
		"stage-out": wrap("stage-out", func(ctx context.Context, a stageArgs, p func(files.StageReport)) (files.StageReport, error) {
			return fsys.StageOut(ctx, a.Paths, a.Drop, p)
		}),
		"evict": wrap("evict", func(ctx context.Context, a stageArgs, _ func(files.StageReport)) (files.StageReport, error) {
			return fsys.Evict(ctx, a.Paths)
		}),
	}
}

// logStage is the daemon's one line about a stage operation.
func logStage(name string, a stageArgs, rep files.StageReport, err error, took time.Duration) {
	what := fmt.Sprintf("%d paths", len(a.Paths))
	if len(a.Paths) == 0 {
		what = "the whole mount"
	} else if len(a.Paths) == 1 {
		what = a.Paths[0]
	}
	l := logrus.WithField("op", name)
	msg := fmt.Sprintf("%s of %s: %d files, %s of %s in %v, %s dropped, %d failed", name, what, rep.Files,
		units.FormatSize(rep.Done), units.FormatSize(rep.Bytes), took.Round(time.Millisecond),
		units.FormatSize(rep.Dropped), rep.FailedCount)
	if err != nil {
		l.Warnf("%s: %v", msg, err)
		return
	}
	l.Info(msg)
}
